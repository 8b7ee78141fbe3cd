"""``SignoffToolset``: a Pydantic AI ``WrapperToolset`` whose ``call_tool`` asks signoff first.

* allowed → the wrapped tool runs;
* denied → the denial, as text, is the tool's result for the model;
* needs a human → the request is stored (approvers notified) and ``ApprovalRequired`` is
  raised with ``metadata={"signoff_request_id": ...}``. The run ends with
  ``DeferredToolRequests`` (the agent's ``output_type`` must include it);
* approved by ``DeferredToolResults`` (``ctx.tool_call_approved``) → run only if signoff's store
  agrees, with the arguments the approver settled on, claimed once on the exactly-once ledger.
  Pydantic AI does not verify results, and neither do we. A ``ToolApproved`` that nobody gave
  in signoff runs nothing.

``blocking=True`` (for servers) waits for the decision inside ``call_tool`` instead.
Requests are keyed on (thread, tool call id). The thread is the ambient
``gate.context(thread=...)``, else ``thread=``, else ``pydantic-ai:<conversation_id>``
(Pydantic AI carries the conversation id in the message history).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any

from pydantic_ai import DeferredToolRequests, RunContext
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.toolsets import WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from signoff.gate import Gate, messages
from signoff.gate.resumed import (
    Ran,
    ambient_context,
    local_gate,
    run_resumed,
    submit,
    with_edit_notice,
)
from signoff.integrations.pydantic_ai.results import REQUEST_ID
from signoff.model import CallContext, IdempotencyConflict, SignoffError, ToolCall, new_id


class SetupError(SignoffError):
    """The agent cannot pause for approval the way it is set up (and what to change)."""


@dataclass
class SignoffToolset(WrapperToolset[Any]):
    """Gate every tool of ``wrapped`` with signoff's policy.

    ``gate`` is a :class:`~signoff.Gate` or the path of a ``signoff.yaml``.
    """

    gate: Gate | Any
    _: KW_ONLY
    blocking: bool = False
    thread: str | None = None
    agent: str | None = None

    def __post_init__(self) -> None:
        self.gate = local_gate(self.gate, "SignoffToolset")

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        call = ToolCall(name, tool_args, id=ctx.tool_call_id or new_id("call"))
        here = self._context(ctx)

        async def run(final: Mapping[str, Any]) -> Any:
            args = tool_args if final is tool_args else tool.args_validator.validate_python(final)
            return await self.wrapped.call_tool(name, args, ctx, tool)

        if ctx.tool_call_approved or self.blocking:
            outcome = await run_resumed(self.gate, call, here, run, wait=self.blocking)
            return with_edit_notice(outcome, name) if isinstance(outcome, Ran) else outcome.text
        verdict = await self.gate.acheck(call, here)
        if verdict.denied:
            return messages.denied(name, verdict)
        if verdict.allowed:
            result = await self.wrapped.call_tool(name, tool_args, ctx, tool)
            self.gate.record_execution(call, here)
            return result
        _check_can_defer(ctx)  # before anything is stored or anyone notified
        try:
            request = await submit(self.gate, call, verdict, here)
        except IdempotencyConflict as exc:
            return (
                f"The tool call `{name}` reuses the id {call.id} of an earlier call on this "
                f"thread with other arguments ({exc}), so it was not executed."
            )
        raise ApprovalRequired(metadata={REQUEST_ID: request.id})

    def _context(self, ctx: RunContext[Any]) -> CallContext:
        thread = self.thread or (
            f"pydantic-ai:{ctx.conversation_id}" if ctx.conversation_id else None
        )
        agent = self.agent or (ctx.agent.name if ctx.agent is not None else None)
        return ambient_context(thread, agent, _prompt_text(ctx.prompt))


def _check_can_defer(ctx: RunContext[Any]) -> None:
    """Refuse before anything is stored when the run cannot end with DeferredToolRequests.

    Only the agent's own ``output_type`` is visible to a toolset (not one passed per run).
    """
    if ctx.agent is None or DeferredToolRequests in _flat(ctx.agent.output_type):
        return
    if any(isinstance(c, HandleDeferredToolCalls) for c in ctx.capabilities.values()):
        return
    raise SetupError(
        "a tool call needs human approval, but this agent cannot pause for it: add "
        "DeferredToolRequests to the agent's output_type (Agent(..., output_type=[str, "
        "DeferredToolRequests])), or use SignoffToolset(..., blocking=True) to wait inside "
        "the run. Nothing was stored and the tool was not executed."
    )


def _prompt_text(prompt: Any) -> str | None:
    """The user's prompt for this run (its text parts), shown to approvers."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list | tuple):
        return "\n".join(p for p in prompt if isinstance(p, str)) or None
    return None


def _flat(spec: Any) -> list[Any]:
    if isinstance(spec, list | tuple):
        return [item for part in spec for item in _flat(part)]
    if typing.get_origin(spec) in (typing.Union, types.UnionType):
        return list(typing.get_args(spec))
    return [spec]
