"""An edit sent back with the secret masked (as the inbox shows it) runs with the agent's own
secret: the SDK never sees the edit, the wrapper takes the arguments from the store."""

from __future__ import annotations

from agents import Agent, function_tool

from signoff import Gate
from signoff.integrations.openai_agents import aresolve, signoff_tools
from signoff.integrations.openai_agents.testing import (
    ScriptedModel,
    calls_then_summary,
    function_call,
)
from signoff.policy.redact import REDACTED
from tests.integrations.openai_agents.conftest import new_thread, pending, run

LIVE = "sk-LIVE-7d1e9b"


async def test_an_edit_with_the_secret_masked_runs_with_the_agents_own_secret(gate: Gate) -> None:
    ran: list[tuple[str, str]] = []

    @function_tool
    def deploy(version: str, api_key: str) -> str:
        """Deploy a version."""
        ran.append((version, api_key))
        return f"deployed {version}"

    call = function_call("deploy", {"version": "v1", "api_key": LIVE}, "call_deploy")
    agent = Agent(
        name="ops",
        model=ScriptedModel(calls_then_summary(call)),
        tools=signoff_tools(gate, [deploy]),
    )
    thread = new_thread()
    with gate.context(thread=thread):
        result = await run(agent, "deploy")
        req = await pending(gate, thread)
        edited = {"name": "deploy", "args": {"version": "v2", "api_key": REDACTED}}
        await gate.adecide(req.id, [{"type": "edit", "edited_action": edited}], approver="alice")
        result = await run(agent, await aresolve(result, gate))
    assert ran == [("v2", LIVE)]
    assert LIVE not in result.final_output  # the edit notice shows the masked value
