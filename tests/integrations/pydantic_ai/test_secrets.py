"""An edit sent back with the secret masked (as the inbox shows it) becomes ``override_args``
with the agent's own secret, and runs with it."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent, DeferredToolRequests, FunctionToolset, ToolApproved

from signoff import Gate
from signoff.integrations.pydantic_ai import SignoffToolset, aresults
from signoff.integrations.pydantic_ai.testing import calls_then_summary, tool_call
from signoff.policy.redact import REDACTED
from tests.integrations.pydantic_ai.conftest import pending

LIVE = "sk-LIVE-7d1e9b"


async def test_an_edit_with_the_secret_masked_runs_with_the_agents_own_secret(gate: Gate) -> None:
    ran: list[tuple[str, str]] = []
    tools: FunctionToolset[Any] = FunctionToolset()

    @tools.tool_plain
    def deploy(version: str, api_key: str) -> str:
        """Deploy a version."""
        ran.append((version, api_key))
        return f"deployed {version}"

    model = calls_then_summary(tool_call("deploy", {"version": "v1", "api_key": LIVE}, "c1"))
    agent = Agent(
        model, toolsets=[SignoffToolset(tools, gate)], output_type=[str, DeferredToolRequests]
    )
    run = await agent.run("deploy")
    req = await pending(gate)
    edited = {"name": "deploy", "args": {"version": "v2", "api_key": REDACTED}}
    await gate.adecide(req.id, [{"type": "edit", "edited_action": edited}], approver="alice")
    answers = await aresults(run.output, gate)
    assert answers.approvals == {
        "c1": ToolApproved(override_args={"version": "v2", "api_key": LIVE})
    }
    await agent.run(message_history=run.all_messages(), deferred_tool_results=answers)
    assert ran == [("v2", LIVE)]
