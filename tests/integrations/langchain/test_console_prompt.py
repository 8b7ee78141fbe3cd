"""The console channel's interactive prompt with the LangChain middleware in blocking mode:
the agent's step waits inside the tool node while the principal answers at a real pty."""

from __future__ import annotations

import io
import threading
from typing import Any

from langchain_core.tools import BaseTool

from signoff import Gate, Policy
from signoff.channels.config import ConsoleConfig
from signoff.channels.console import ConsoleChannel
from signoff.channels.console_prompt import Terminal
from signoff.integrations.langchain import SignoffMiddleware
from signoff.integrations.langchain.testing import tool_call
from signoff.store import MemoryStore
from tests.channels.test_console_interactive import Pty
from tests.integrations.langchain.conftest import Ran, go, make_agent


def test_blocking_mode_asks_the_principal_at_the_agents_terminal(
    tools: list[BaseTool], ran: Ran
) -> None:
    term = Pty()
    channel = ConsoleChannel(
        ConsoleConfig(interactive=True),
        stream=io.StringIO(),
        terminal=lambda: Terminal(term.slave, term.slave),
    )
    gate = Gate(
        Policy.from_interrupt_on({"delete_file": True}),  # forbid_self_approval: false
        MemoryStore(),
        channels=[channel],
        interactive=True,
    )
    middleware = SignoffMiddleware(gate=gate, mode="blocking", principal="erin")
    delete = tool_call("delete_file", {"path": "tmp/x"}, "d1")
    agent = make_agent(middleware, tools, delete, checkpointer=None)
    result: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: result.update(out=agent.invoke(go())))
    worker.start()
    try:
        shown = term.expect("your answer: ")
        assert "delete_file" in shown and "[y/1] approve" in shown
        term.type("y")
        worker.join()
    finally:
        gate.close()
        term.close()
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]
    assert result["out"]["messages"][-1].content == "done: deleted tmp/x"
