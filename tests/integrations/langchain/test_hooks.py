"""The ``wrap_*`` hooks as LangChain sees them: inspectable for free, still the middleware's.

``create_agent`` wraps each hook in LangSmith's ``traceable``, which calls
``inspect.signature`` on it at every call; the hooks carry their signature ready-made
(``_hooks.FastHook``), and must still behave as the bound methods they replace. The tools
node counts an executed call for the policy's rate limits only for a tool that has one.
"""

from __future__ import annotations

import inspect
from datetime import timedelta
from typing import Any

import pytest
from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.tools import BaseTool

from signoff import Gate, Policy
from signoff.integrations.langchain import SignoffMiddleware
from signoff.model import utcnow
from signoff.store import MemoryStore
from tests.integrations.langchain.conftest import (
    Ran,
    final_text,
    go,
    make_agent,
    thread,
    tool_call,
)

HOOKS = ("wrap_model_call", "awrap_model_call", "wrap_tool_call", "awrap_tool_call")


@pytest.mark.parametrize("name", HOOKS)
def test_a_hook_carries_the_bound_methods_signature_ready_made(name: str) -> None:
    middleware = SignoffMiddleware({"delete_file": True})
    hook = getattr(middleware, name)
    function = vars(AgentMiddleware)[name]  # the base's hook, a plain method
    expected = inspect.signature(getattr(SignoffMiddleware, name).__get__(middleware))
    assert inspect.signature(hook) is hook.__signature__  # nothing built per call
    assert hook.__signature__ == expected
    assert list(hook.__signature__.parameters) == ["request", "handler"]
    assert hook.__self__ is middleware
    assert hook.__name__ == name
    assert inspect.iscoroutinefunction(hook) == inspect.iscoroutinefunction(function)


@pytest.mark.parametrize("name", HOOKS)
def test_read_on_the_class_a_hook_is_signoffs_own_function(name: str) -> None:
    # create_agent adds a hook only if the class's differs from AgentMiddleware's.
    on_class = getattr(SignoffMiddleware, name)
    assert inspect.isfunction(on_class)
    assert on_class is not getattr(AgentMiddleware, name)


def test_a_subclass_overriding_a_hook_runs_its_own(tools: list[BaseTool], ran: Ran) -> None:
    seen: list[str] = []

    class Watching(SignoffMiddleware):
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            seen.append(request.tool_call["name"])
            return super().wrap_tool_call(request, handler)

    middleware = Watching({"delete_file": True})
    agent = make_agent(middleware, tools, tool_call("read_file", {"path": "a"}, "c1"))
    result = agent.invoke(go(), thread(), version="v2")
    assert seen == ["read_file"] and ran.names() == ["read_file"]
    assert final_text(result) == "done: contents of a"


RATE_LIMITED = """
version: 1
tools:
  read_file:
    default: allow
    rules:
      - id: burst
        when: {rate: {max: 1, per: 1h}}
        decision: deny
        reason: one read an hour
  delete_file: {default: require_approval}
"""


def test_an_ungated_call_of_a_rate_limited_tool_is_counted(tools: list[BaseTool], ran: Ran) -> None:
    gate = Gate(Policy.from_yaml(RATE_LIMITED), MemoryStore())
    try:
        middleware = SignoffMiddleware(gate)
        read = tool_call("read_file", {"path": "a"}, "c1")
        make_agent(middleware, tools, read).invoke(go(), thread())
        assert ran.names() == ["read_file"]
        later = utcnow() + timedelta(seconds=1)
        assert gate.rates.count("read_file", "tool", "", 3600, later) == 1
        second = make_agent(middleware, tools, read).invoke(go(), thread(), version="v2")
        assert ran.names() == ["read_file"]  # the second read was denied, not run
        assert "one read an hour" in final_text(second)
    finally:
        gate.close()
