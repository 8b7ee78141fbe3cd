"""The ``ToolMessage``s signoff puts in the conversation.

Two kinds: *answers* the model reads in place of a tool result (rejected, answered,
expired, cancelled, denied — texts from :mod:`signoff.gate.messages`, which are
LangChain's current ones), and *holds*: a placeholder result for a call waiting for a
human in interrupt mode. A hold keeps LangChain's router from sending the call to the
tools node; it is replaced (same message id, same position) by the answer, or removed
so the approved call runs. The model never sees a hold: the middleware pauses or
replaces it before every model call.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.messages import ToolCall as LCToolCall
from langgraph.types import Command

from signoff.gate import messages
from signoff.model import ApprovalRequest, CallState, Verdict

HOLD = "signoff_hold"
"""Key of a hold's ``artifact``: ``{"request_id", "verdict", "rule"}``."""

DEFAULT_EDIT_NOTICE = (
    "Note: a human reviewer replaced this tool call before it ran. The call recorded in "
    "your message is the one you produced, not the one that executed. This was "
    "intentional and authorized. Do not re-issue your original call."
)


def answer(req: ApprovalRequest, state: CallState, tool: str, call_id: str) -> ToolMessage:
    """The result the model gets for a reviewed call that did not run (``call_id``: the
    model's own tool-call id)."""
    return ToolMessage(
        content=messages.outcome_text(req, state, call_id),
        name=tool,
        tool_call_id=call_id,
        status="success" if state.resolution == "responded" else "error",
        artifact={"signoff": {"request_id": req.id, "resolution": state.resolution}},
    )


def denied(call: LCToolCall, verdict: Verdict) -> ToolMessage:
    return ToolMessage(
        content=messages.denied(call["name"], verdict),
        name=call["name"],
        tool_call_id=call["id"] or "",
        status="error",
        artifact={"signoff": {"rule": verdict.rule, "resolution": "denied"}},
    )


def refused(call: LCToolCall, text: str) -> ToolMessage:
    """A call signoff will not run (fail closed), with why."""
    return ToolMessage(
        content=text, name=call["name"], tool_call_id=call["id"] or "", status="error"
    )


def hold(call: LCToolCall, stored_id: str, request_id: str, verdict: Verdict) -> ToolMessage:
    """``stored_id``: the turn-scoped id, so a reused tool-call id gets a hold of its own."""
    return ToolMessage(
        content=(
            f"Waiting for a human decision (signoff request {request_id}); the tool has not run."
        ),
        name=call["name"],
        tool_call_id=call["id"] or "",
        id=f"signoff-hold-{stored_id}",
        artifact={HOLD: {"request_id": request_id, "verdict": verdict.kind, "rule": verdict.rule}},
    )


def hold_info(message: AnyMessage) -> dict[str, str] | None:
    if not isinstance(message, ToolMessage) or not isinstance(message.artifact, dict):
        return None
    info = message.artifact.get(HOLD)
    return info if isinstance(info, dict) else None


def superseded(hold_message: ToolMessage, request_id: str) -> ToolMessage:
    """A hold's replacement when the user wrote a new message instead of deciding."""
    return ToolMessage(
        content=messages.cancelled(
            hold_message.name or "tool",
            hold_message.tool_call_id,
            "superseded by a new user message",
        ),
        name=hold_message.name,
        tool_call_id=hold_message.tool_call_id,
        id=hold_message.id,
        status="error",
        artifact={"signoff": {"request_id": request_id, "resolution": "cancelled"}},
    )


def last_ai(messages_: Sequence[AnyMessage]) -> tuple[int, AIMessage] | None:
    for i in range(len(messages_) - 1, -1, -1):
        message = messages_[i]
        if isinstance(message, AIMessage):
            return i, message
    return None


def with_edit_notice(
    result: ToolMessage | Command[Any], call_id: str, tool: str, args: dict[str, Any], notice: str
) -> ToolMessage | Command[Any]:
    """Tell the model a reviewer replaced its call, and with what (LangChain's wording)."""
    if isinstance(result, ToolMessage):
        return _prepend(result, tool, args, notice)
    if isinstance(result, Command) and isinstance(result.update, dict):
        found = result.update.get("messages")
        if isinstance(found, list):
            patched = [
                _prepend(m, tool, args, notice)
                if isinstance(m, ToolMessage) and m.tool_call_id == call_id
                else m
                for m in found
            ]
            return Command(
                graph=result.graph,
                update={**result.update, "messages": patched},
                resume=result.resume,
                goto=result.goto,
            )
    return result


def _prepend(message: ToolMessage, tool: str, args: dict[str, Any], notice: str) -> ToolMessage:
    content = message.content
    if notice == DEFAULT_EDIT_NOTICE and isinstance(content, str) and content:
        return message.model_copy(update={"content": messages.edit_notice(tool, args, content)})
    text = f"{notice} Executed instead: {tool} with arguments {json.dumps(args, default=str)}."
    if not content:
        return message.model_copy(update={"content": text})
    if isinstance(content, str):
        return message.model_copy(update={"content": f"{text}\n\nTool response:\n{content}"})
    block: str | dict[str, Any] = (
        f"{text}\n\nTool response:"
        if all(isinstance(b, str) for b in content)
        else {"type": "text", "text": f"{text}\n\nTool response:"}
    )
    return message.model_copy(update={"content": [block, *content]})


def status_of(result: ToolMessage | Command[Any]) -> tuple[Literal["ok", "failed"], str | None]:
    """Whether a tool run failed (an error ``ToolMessage``), for the exactly-once ledger."""
    if isinstance(result, ToolMessage) and result.status == "error":
        return "failed", str(result.content)[:500]
    return "ok", None
