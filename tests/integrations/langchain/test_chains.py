"""The interrupt value of a call under an approval chain carries the chain and its progress,
and a resume by the first stage alone does not run the tool."""

from __future__ import annotations

import textwrap
from typing import Any

from langchain_core.tools import BaseTool

from signoff import Gate, Policy
from signoff.integrations.langchain import SignoffMiddleware
from signoff.store import MemoryStore
from tests.integrations.langchain.conftest import Ran, go, make_agent, thread, tool_call

POLICY = """
version: 1
people:
  mia:  {roles: [manager]}
  fay:  {roles: [finance]}
  fred: {roles: [finance]}
tools:
  read_file: {default: allow}
  delete_file:
    default: require_approval
    approvers:
      stages: [{roles: [manager]}, {roles: [finance], quorum: 2}]
"""

DELETE = tool_call("delete_file", {"path": "prod/secrets.env"}, "call_1")


def test_the_interrupt_value_shows_the_chain_and_its_progress(
    tools: list[BaseTool], ran: Ran
) -> None:
    gate = Gate(Policy.from_yaml(textwrap.dedent(POLICY)), MemoryStore())
    middleware = SignoffMiddleware(gate=gate, principal="erin")
    agent = make_agent(middleware, tools, DELETE)
    cfg = thread()
    out = agent.invoke(go(), cfg, version="v2")
    value: Any = out.interrupts[0].value
    approvers = value["review_configs"][0]["approvers"]
    assert approvers["stages"] == [
        {"roles": ["manager"], "users": [], "quorum": 1, "approvals": []},
        {"roles": ["finance"], "users": [], "quorum": 2, "approvals": []},
    ]
    assert approvers["stage"] == 0 and approvers["distinct"] is True
    assert approvers["progress"] == "stage 1 of 2: 0 of 1 manager approval"
    gate.decide(value["request_id"], [{"type": "approve"}], approver="mia")
    out = agent.invoke(None, cfg, version="v2")  # still pending: paused again
    assert ran.calls == []  # mia's approval is stage 1 only: nothing ran
    again = out.interrupts[0].value["review_configs"][0]["approvers"]
    assert again["progress"] == "stage 2 of 2: 0 of 2 finance approvals"
    assert again["stages"][0]["approvals"] == ["mia"] and again["stage"] == 1
    gate.close()
