"""Where the SDK's own approval rules and signoff's meet."""

from __future__ import annotations

from typing import Any

from agents import Agent, FunctionTool, RunContextWrapper, function_tool
from pydantic import BaseModel, field_validator

from signoff import Gate
from signoff.integrations.openai_agents import signoff_tools
from signoff.integrations.openai_agents.testing import (
    ScriptedModel,
    calls_then_summary,
    function_call,
)
from tests.integrations.openai_agents.conftest import run


class Target(BaseModel):
    path: str

    @field_validator("path")
    @classmethod
    def trimmed(cls, value: str) -> str:
        return value.strip()


def application_model_tool(seen: list[str], **options: Any) -> FunctionTool:
    @function_tool(**options)
    def read_file(target: Target) -> str:
        """Read a file."""
        seen.append(target.path)
        return f"contents of {target.path}"

    return read_file


CALL = function_call("read_file", {"target": {"path": " a.txt"}}, "c1")


async def test_sdk_alone_forces_approval_for_tools_taking_application_models() -> None:
    """The SDK never asks a needs_approval callable about such a call (validating its
    arguments could run application code): it always asks a human."""
    asked: list[str] = []

    async def never(_ctx: RunContextWrapper[Any], _params: dict[str, Any], call_id: str) -> bool:
        asked.append(call_id)
        return False

    tool = application_model_tool([], needs_approval=never)
    agent = Agent(name="ops", model=ScriptedModel(calls_then_summary(CALL)), tools=[tool])
    result = await run(agent, "read")
    assert len(result.interruptions) == 1 and asked == []


async def test_with_signoff_the_policy_decides_on_the_arguments_as_sent(gate: Gate) -> None:
    seen: list[str] = []
    tools = signoff_tools(gate, [application_model_tool(seen)])
    agent = Agent(name="ops", model=ScriptedModel(calls_then_summary(CALL)), tools=tools)
    result = await run(agent, "read")
    assert not result.interruptions  # read_file: allow
    assert seen == ["a.txt"]  # validated by the tool after signoff's check
