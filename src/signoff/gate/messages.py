"""Texts returned to the model. Wording matters: models loop on vague rejections, so each
says what happened and what to do (LangChain's current texts, which models already know)."""

from __future__ import annotations

import json

from signoff.model import ApprovalRequest, CallState, Verdict


def rejected(tool: str, call_id: str, message: str | None) -> str:
    if message:
        return f"User rejected the tool call for `{tool}` with reason: {message}"
    return (
        f"User rejected the tool call for `{tool}` with id {call_id}. The tool was not "
        "executed. Do not retry this tool call unless the user explicitly requests it."
    )


def denied(tool: str, verdict: Verdict) -> str:
    text = f"The tool call `{tool}` was denied by policy rule `{verdict.rule}`"
    reason = (verdict.reason or "").rstrip()
    text += f": {reason}" if reason else ""
    text += "" if text.endswith((".", "!", "?")) else "."
    if verdict.rule == "schema" and verdict.errors:
        return (
            f"The arguments for `{tool}` are invalid: "
            + "; ".join(verdict.errors)
            + ". Fix the arguments and call the tool again."
        )
    return text + " The tool was not executed. Do not retry it unchanged."


def expired(tool: str, call_id: str) -> str:
    return (
        f"No human decision arrived in time for the tool call `{tool}` (id {call_id}). "
        "The tool was not executed. Do not retry it automatically; continue without it "
        "or ask the user."
    )


def cancelled(tool: str, call_id: str, reason: str | None) -> str:
    extra = f" ({reason})" if reason else ""
    return (
        f"The approval request for `{tool}` (id {call_id}) was cancelled{extra}. "
        "The tool was not executed."
    )


#: What a non-interactive run stores as the reason of a call it rejects for want of a human.
NO_HUMAN = "no human is available to approve (non-interactive mode)"


def no_human(tool: str, detail: str | None = None) -> str:
    """A call rejected in a non-interactive run; ``detail`` says why, when it is more than
    "nobody can answer" (a shell command off the allow-list, and which commands are on it)."""
    why = f" {detail[0].upper()}{detail[1:]}." if detail and detail != NO_HUMAN else ""
    return (
        f"`{tool}` needs human approval, but no human is available (non-interactive "
        f"mode).{why} The tool was not executed. Continue without it or stop and report."
    )


def edit_notice(tool: str, args: dict[str, object], result: str) -> str:
    return (
        "Note: a human reviewer replaced this tool call before it ran. The call recorded "
        "in your message is the one you produced, not the one that executed. This was "
        "intentional and authorized. Do not re-issue your original call. Executed "
        f"instead: {tool} with arguments {json.dumps(args, default=str)}.\n\n"
        f"Tool response:\n{result}"
    )


def outcome_text(req: ApprovalRequest, call: CallState, shown_id: str | None = None) -> str:
    """The model-facing text for a call that did not run; ``shown_id`` is the call id the
    model knows, when an integration stores another (LangChain scopes ids per turn)."""
    name = req.action_request(call.tool_call_id).name
    call_id = shown_id or call.tool_call_id
    if call.resolution == "rejected":
        if call.resolved_by == "non-interactive":
            return no_human(name, call.message)
        return rejected(name, call_id, call.message)
    if call.resolution == "responded":
        return call.message or ""
    if call.resolution == "expired":
        return expired(name, call_id)
    if call.resolution == "cancelled":
        return cancelled(name, call_id, call.message)
    return f"`{name}` was {call.resolution}"
