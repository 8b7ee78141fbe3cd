"""Texts the MCP integrations show: to the model (tool results) and to people (progress,
in-client prompts). The gate's own outcome texts live in :mod:`signoff.gate.messages`; these
add what only MCP needs — where to answer, unknown tools, refusals that fail closed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from signoff.model import ApprovalRequest, utcnow
from signoff.model.text import inert
from signoff.policy import Policy
from signoff.policy.redact import mask


def approval_url(policy: Policy, request_id: str) -> str | None:
    """The web inbox page of a request, when ``serve.public_url`` is configured."""
    base = policy.sections.get("serve", {}).get("public_url")
    if not isinstance(base, str) or not base.strip():
        return None
    return f"{base.strip().rstrip('/')}/requests/{request_id}"


def where_to_answer(policy: Policy, request_id: str, verb: str = "approve") -> str:
    url = approval_url(policy, request_id)
    if url:
        return f"Answer at {url}"
    return f"Answer with `signoff {verb} {request_id} --as <you>` (or `signoff show {request_id}`)"


def remaining(req: ApprovalRequest) -> str:
    seconds = max(0, int((req.expires_at - utcnow()).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds / 3600:.1f} h"


def held(policy: Policy, req: ApprovalRequest) -> str:
    """A heartbeat while a tool call waits for approval."""
    tools = ", ".join(f"`{a.name}`" for a in req.action_requests)
    return (
        f"Waiting for human approval of {tools} (request {req.id}, "
        f"{remaining(req)} left). {where_to_answer(policy, req.id)}."
    )


def held_meta(policy: Policy, req: ApprovalRequest) -> dict[str, Any]:
    return {
        "type": "APPROVAL",
        "requestId": req.id,
        "approvalUrl": approval_url(policy, req.id),
        "tools": [a.name for a in req.action_requests],
        "expiresAt": req.expires_at.isoformat(),
    }


def approval_prompt(policy: Policy, req: ApprovalRequest) -> str:
    """What the in-client approval form says (deterministic per call)."""
    lines = ["signoff: an agent wants to run a tool that needs your approval."]
    for action in req.action_requests:
        # The policy's redact_keys, like every other surface: masked at any depth. Everything
        # the agent controls is made inert (no escape codes, bidi tricks or fake lines).
        args = json.dumps(mask(action.args, policy.secret_keys), ensure_ascii=False, default=str)
        lines.append(f"Tool: {inert(action.name)}\nArguments: {inert(args[:1500])}")
        if action.description:
            lines.append(f"Why it needs approval: {inert(action.description)}")
        if action.intent:
            judged = action.intent
            lines.append(
                f"Intent check by judge {inert(str(judged.get('judge')))} (model output): "
                f"{inert(str(judged.get('verdict')))} — {inert(str(judged.get('reason', '')))}"
            )
        if action.rule:
            lines.append(f"Rule: {inert(action.rule)}")
    lines.append(f"Request {req.id}; deadline {req.expires_at.isoformat(timespec='seconds')}.")
    url = approval_url(policy, req.id)
    if url:
        lines.append(f"Also answerable at {url}")
    return "\n".join(lines)


def unknown_tool(name: str, available: list[str]) -> str:
    shown = ", ".join(available[:30]) + (" …" if len(available) > 30 else "")
    return (
        f"Unknown tool `{name}`: no server behind this proxy offers it. Available tools: "
        f"{shown or 'none'}. The call was not executed; use one of the listed names."
    )


def store_unavailable(tool: str, error: object) -> str:
    return (
        f"`{tool}` needs human approval, but signoff could not record the approval request "
        f"({error}). The tool was not executed. Do not retry it automatically; tell the user "
        "that the approval system is unavailable."
    )


def nobody_notified(tool: str, failures: list[str]) -> str:
    return (
        f"`{tool}` needs human approval, but no approver could be notified "
        f"({'; '.join(failures) or 'every channel failed'}). The tool was not executed. "
        "Do not retry it automatically; tell the user that approvals cannot reach anyone."
    )


def answer_refused(tool: str) -> str:
    return (
        f"The approval answer for `{tool}` was not accepted: it was already used, expired, or "
        "was not issued by this proxy. The tool was not executed. Do not retry automatically."
    )


def upstream_failed(tool: str, error: object) -> str:
    return (
        f"The server behind `{tool}` failed ({error}). The call may not have completed; check "
        "before retrying."
    )


def upstream_down(tool: str, reason: str) -> str:
    return (
        f"The server behind `{tool}` is not available right now ({reason}); the tool was not "
        "executed. It is being restarted: try again in a little while."
    )


def upstream_lost(tool: str) -> str:
    return (
        f"The server behind `{tool}` stopped during the call; it is being restarted. The call "
        "may or may not have completed: check before retrying."
    )


def upstream_timeout(tool: str, seconds: float | None) -> str:
    limit = f" within {seconds:g} s" if seconds is not None else ""
    return (
        f"The server behind `{tool}` did not answer{limit} (--upstream-timeout); the call was "
        "cancelled and may or may not have completed: check before retrying."
    )


def upstream_unfinished(tool: str) -> str:
    return (
        f"The server behind `{tool}` kept asking for more input and did not finish; the "
        "call was given up."
    )


def edit_note(tool: str, args: Mapping[str, Any]) -> str:
    return (
        "Note: a human reviewer edited this tool call before it ran. This was intentional and "
        "authorized; do not re-issue your original call. Executed instead: "
        f"{tool} with arguments {json.dumps(dict(args), default=str, ensure_ascii=False)}."
    )


# ---------------------------------------------------------------------------- inquiries
KEEP_GOING = "Keep working with what you have; do not ask the same question again."


def inquiry_guidance(
    status: str, answer: str | None, waited_s: float, inquiry_id: str, *, judge: str | None = None
) -> str:
    """The text part of an inquiry result: what happened and what the model should do."""
    if status == "answered" and judge is not None:
        return (
            f"No human answered in time; the fallback judge ({judge}, a model, not a human) "
            f"answered: {answer}\nTreat this as model output, not as a human's decision, and "
            "say so where it matters."
        )
    if status == "answered":
        return f"The human answered: {answer}"
    if status == "pending":
        return (
            f"The question was sent (inquiry {inquiry_id}) and has no answer yet. Continue "
            f"other work and call get_answer(inquiry_id={inquiry_id!r}) later."
        )
    if status == "declined":
        reason = f" ({answer})" if answer else ""
        return f"The human declined to answer{reason}. {KEEP_GOING}"
    if status == "expired":
        return (
            f"No answer arrived within {waited_s:.0f} s. {KEEP_GOING} State any assumption "
            "you make."
        )
    if status == "cancelled":
        return f"The question was withdrawn before anyone answered. {KEEP_GOING}"
    return (
        "No human is available to answer right now (unattended mode). Decide yourself using "
        "your best judgement, state the assumption you made, and continue; do not ask again."
    )
