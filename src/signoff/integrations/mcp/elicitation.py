"""Asking the agent's own user inside the MCP client (elicitation), in both protocol eras.

* 2025-11-25 and earlier: the server pushes ``elicitation/create`` and awaits the answer —
  run beside the out-of-band wait, so whichever human answers first wins and the other
  prompt is withdrawn (cancelling the push makes the SDK send ``notifications/cancelled``).
* 2026-07-28: the server returns an ``InputRequiredResult`` and the client retries with the
  answer; see :mod:`signoff.integrations.mcp.sealed` for why that answer can be trusted.

An in-client answer is the principal's own decision (the person the agent acts for), so it
is offered only where the rule lets them decide alone: ``forbid_self_approval: false``, the
principal among the approvers, no quorum. Otherwise the call waits for an independent
approver out of band.
"""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from signoff.channels.menu import principal_may_decide
from signoff.gate import Gate
from signoff.model import ApprovalRequest, Inquiry, Question
from signoff.model.text import inert

log = logging.getLogger("signoff.mcp")

APPROVAL_KEY = "signoff_approval"
ANSWER_KEY = "signoff_answer"

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Decision",
            "enum": ["approve", "reject"],
            "description": "approve runs the tool now; reject tells the agent it may not",
        },
        "reason": {"type": "string", "title": "Reason (optional, shown to the agent)"},
    },
    "required": ["decision"],
}


def prompt_of(inquiry: Inquiry) -> str:
    """The form's message: the agent's question, inert (no escapes, bidi or hidden text)."""
    return inert(inquiry.question, keep_newlines=True)


def answer_schema(inquiry: Inquiry) -> dict[str, Any]:
    """A flat form: one ``answer`` field for a single question, one field per question id for
    a form — a pick list where the choices bind, a multi-select where ``multiple``."""
    if not inquiry.is_form:
        (single,) = inquiry.all_questions()
        field = _field(single, "Your answer")
        return {"type": "object", "properties": {"answer": field}, "required": ["answer"]}
    questions = inquiry.all_questions()
    return {
        "type": "object",
        "properties": {q.id: _field(q, inert(q.question)) for q in questions},
        "required": [q.id for q in questions if not q.multiple],
    }


def _field(q: Question, title: str) -> dict[str, Any]:
    if q.multiple and q.choices:
        field: dict[str, Any] = {
            "type": "array",
            "title": title,
            "items": {"type": "string", "enum": list(q.choices)},
        }
    else:
        field = {"type": "string", "title": title}
        if q.choices and q.allow_other:
            field["description"] = "Suggestions: " + ", ".join(q.choices)
        elif q.choices:
            field["enum"] = list(q.choices)
    if q.default_answer is not None:
        field["default"] = q.default_answer
    return field


def is_modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    """True on 2026-07-28+ (no server-to-client requests: answers come by retry)."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def client_name(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The client's self-reported name (``claude-code``, ``cursor``…), when it gave one."""
    info = (ctx.meta or {}).get(types.CLIENT_INFO_META_KEY)
    if isinstance(info, dict) and isinstance(info.get("name"), str):
        return str(info["name"])
    params = ctx.session.client_params
    return params.client_info.name if params is not None else None


def can_elicit_form(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the client declared form elicitation (``{}`` means form only)."""
    caps = ctx.session.client_capabilities
    if caps is None or caps.elicitation is None:
        return False
    return caps.elicitation.form is not None or caps.elicitation.url is None


def self_approvable(gate: Gate, req: ApprovalRequest, principal: str) -> bool:
    """Whether ``principal`` alone may approve every undecided call of ``req`` (the rule the
    console channel's interactive prompt follows too)."""
    return principal_may_decide(gate.policy, req, principal)


async def push(
    ctx: ServerRequestContext[Any, Any], message: str, schema: dict[str, Any]
) -> types.ElicitResult | None:
    """Push one form to the client (2025 era); None when it cannot be asked or fails."""
    try:
        return await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    except Exception as exc:  # the client may refuse; the out-of-band wait goes on
        log.info("in-client prompt failed: %s", exc)
        return None


def input_required(
    key: str, message: str, schema: dict[str, Any], state: str
) -> types.InputRequiredResult:
    """The 2026 way to ask: the question plus the (to-be-sealed) state to echo back."""
    request = types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
    )
    return types.InputRequiredResult(input_requests={key: request}, request_state=state)


def answer_in(params: types.CallToolRequestParams, key: str) -> types.ElicitResult | None:
    """The client's answer to our question ``key`` in a 2026 retry."""
    found = (params.input_responses or {}).get(key)
    if isinstance(found, types.ElicitResult):
        return found
    if isinstance(found, dict):
        try:
            return types.ElicitResult.model_validate(found)
        except ValueError:
            return None
    return None


def approval_decision(result: types.ElicitResult, call_id: str) -> dict[str, Any] | None:
    """An approve/reject decision from the form; None when the prompt was just dismissed."""
    content = result.content or {}
    reason = content.get("reason")
    message = reason.strip() if isinstance(reason, str) and reason.strip() else None
    if result.action == "accept" and content.get("decision") == "approve":
        return {"tool_call_id": call_id, "type": "approve", "message": message}
    if result.action == "accept" or result.action == "decline":
        return {
            "tool_call_id": call_id,
            "type": "reject",
            "message": message or "rejected in the MCP client",
        }
    return None


def answer_decision(
    result: types.ElicitResult, call_id: str, inquiry: Inquiry
) -> dict[str, Any] | None:
    """A respond (answer) or reject (declined) decision; None when dismissed. The answer is
    checked like any other when the decision is applied."""
    content = result.content or {}
    if result.action == "accept":
        if inquiry.is_form:
            answers = {q.id: content[q.id] for q in inquiry.all_questions() if q.id in content}
            return {"tool_call_id": call_id, "type": "respond", "answers": answers}
        answer = content.get("answer")
        if isinstance(answer, str) and answer.strip():
            return {"tool_call_id": call_id, "type": "respond", "message": answer.strip()}
    if result.action in ("accept", "decline"):
        return {"tool_call_id": call_id, "type": "reject", "message": "declined in the client"}
    return None
