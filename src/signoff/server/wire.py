"""The HTTP API's JSON shapes: request bodies (validated) and responses (documented).

Bodies are pydantic models so a bad field is a 422 that names it. Responses are built as
plain dicts on the hot path and described here by models, from which ``/openapi.json`` is
generated — a test checks each view against its model so the two cannot drift apart.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from signoff.model import (
    ApprovalRequest,
    CallContext,
    Resolution,
    Status,
    ToolCall,
    VerdictKind,
)
from signoff.model.grants import Grant
from signoff.policy import Policy
from signoff.policy.redact import NameMatcher, mask_request

NAME = Field(min_length=1, max_length=200)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolCallIn(_Body):
    """One tool call of an agent step: the framework's id, the tool, its arguments."""

    id: str = NAME
    name: str = NAME
    args: dict[str, Any] = Field(default_factory=dict)


class PrincipalIn(_Body):
    id: str = NAME
    roles: list[str] = Field(default_factory=list)


class ContextIn(_Body):
    """Whom the agent acts for, on which thread, and why. The server's clock is the call
    time (an agent cannot move itself into another time window)."""

    principal: PrincipalIn | None = None
    thread: str = Field(default="default", min_length=1, max_length=200)
    agent: str | None = Field(default=None, max_length=200)
    environment: str | None = Field(default=None, max_length=200)
    user_request: str | None = Field(default=None, max_length=20_000)
    reasoning: str | None = Field(default=None, max_length=20_000)
    attrs: dict[str, Any] = Field(default_factory=dict)


class SubmitBody(_Body):
    """``POST /v1/requests``: one agent step's tool calls and their context."""

    tool_calls: list[ToolCallIn] = Field(min_length=1, max_length=100)
    context: ContextIn = Field(default_factory=ContextIn)
    #: The agent restarted: re-attach to this step's open request from before (once its old
    #: waiter's lease lapsed) instead of asking again. RemoteGate sends it on its first step
    #: per (thread, agent). The answer's ``stored_ids`` map submitted call ids to the request's.
    reattach: bool = False

    @field_validator("tool_calls")
    @classmethod
    def _unique_ids(cls, calls: list[ToolCallIn]) -> list[ToolCallIn]:
        ids = [c.id for c in calls]
        if len(set(ids)) != len(ids):
            raise ValueError("tool-call ids must be unique within one step")
        return calls


class InquiryBody(_Body):
    """``POST /v1/inquiries``: a question for a human, answered with a ``respond``."""

    question: str | None = Field(default=None, min_length=1, max_length=20_000)
    choices: list[str] | None = Field(default=None, max_length=50)
    default_answer: str | None = Field(default=None, max_length=20_000)
    #: Choices bind unless this is true.
    allow_other: bool = False
    #: A form: ``[{id, question, choices?, multiple?, default_answer?, allow_other?}]``,
    #: answered with ``answers`` keyed by id (checked by ``signoff.model.make_inquiry``).
    questions: list[dict[str, Any]] | None = Field(default=None, min_length=1, max_length=20)
    format: Literal["text", "markdown"] = "text"
    timeout: float = Field(default=3600.0, gt=0, le=30 * 86400)
    context: ContextIn = Field(default_factory=ContextIn)


class CancelBody(_Body):
    reason: str | None = Field(default=None, max_length=20_000)


class GrantBody(_Body):
    """``POST /v1/grants``: a standing approval (``effect: allow``) or refusal (``deny``) of
    later calls of ``tool`` under ``rule`` (default: the rule the policy sends such a call to,
    told from ``when``'s literal equalities), in one ``scope`` — ``thread`` needs ``thread``,
    ``agent`` and ``principal``; ``agent`` needs ``agent``; ``principal`` needs ``principal``;
    ``global`` none. ``for`` is its lifetime (``8h``; default ``grants.default_ttl``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    tool: str = NAME
    effect: Literal["allow", "deny"]
    scope: Literal["thread", "agent", "principal", "global"]
    thread: str | None = Field(default=None, min_length=1, max_length=200)
    agent: str | None = Field(default=None, min_length=1, max_length=200)
    principal: str | None = Field(default=None, min_length=1, max_length=200)
    rule: str | None = Field(default=None, min_length=1, max_length=200)
    when: dict[str, Any] | None = None
    for_: str | float | None = Field(default=None, alias="for")
    reason: str | None = Field(default=None, max_length=20_000)


class RevokeGrantBody(_Body):
    """``DELETE /v1/grants/{id}`` (optional body): why it is revoked."""

    reason: str | None = Field(default=None, max_length=20_000)


class ExecutionBody(_Body):
    """The exactly-once ledger of an approved call run by a remote agent."""

    state: Literal["executing", "executed", "failed"]
    error: str | None = Field(default=None, max_length=20_000)


def build_context(body: ContextIn, agent: str, trusted_roles: bool, policy: Policy) -> CallContext:
    """The call context for an authenticated agent: its own name, and body roles only where
    the token is trusted with them (``people:`` always wins for listed principals)."""
    principal = body.principal or PrincipalIn(id="anonymous")
    roles = principal.roles if trusted_roles else ()
    return CallContext(
        principal=policy.principal(principal.id, roles),
        thread=body.thread,
        agent=agent,
        environment=body.environment,
        user_request=body.user_request,
        reasoning=body.reasoning,
        attrs=body.attrs,
    )


def tool_calls(body: SubmitBody) -> list[ToolCall]:
    return [ToolCall(c.name, c.args, id=c.id) for c in body.tool_calls]


# ---------------------------------------------------------------------- responses
class VerdictOut(BaseModel):
    tool_call_id: str
    verdict: VerdictKind
    rule: str
    reason: str | None
    grant: str | None = None  # the grant that approved or rejected it at once, if one did


class SubmitOut(BaseModel):
    """Per-call verdicts; ``id`` and ``status`` when a call needs approval."""

    verdicts: list[VerdictOut]
    id: str | None = None
    status: Status | None = None


class MatchedRule(BaseModel):
    tool_call_id: str
    rule: str
    reason: str | None


class QuorumProgress(BaseModel):
    tool_call_id: str
    required: int
    approvals: list[str]


class CallOutcome(BaseModel):
    tool_call_id: str
    resolution: Resolution | None
    by: str | None
    at: datetime | None
    message: str | None


class RequestOut(ApprovalRequest):
    """One request: LangChain's ``HITLRequest`` fields (``action_requests``,
    ``review_configs``) plus status, deadline, decisions, quorum progress, resolution."""

    deadline: datetime
    matched_rules: list[MatchedRule]
    quorum: list[QuorumProgress]
    resolution: list[CallOutcome]
    notices: list[str] = Field(
        default_factory=list
    )  # e.g. an edit moved a call to a stricter rule: who must decide now


class GrantOut(BaseModel):
    """A grant (:class:`~signoff.model.grants.Grant`'s fields): what it covers, who made it
    and why, until when; plus ``active`` (neither revoked nor expired now) and
    ``description``, the sentence saying exactly what it covers."""

    id: str
    tool: str
    rule: str
    effect: Literal["allow", "deny"]
    scope: Literal["thread", "agent", "principal", "global"]
    thread: str | None
    agent: str | None
    principal: str | None
    when: dict[str, Any] | None
    created_at: datetime
    expires_at: datetime
    created_by: str
    reason: str | None
    source_request: str | None
    source_call: str | None
    revoked_at: datetime | None
    revoked_by: str | None
    revoke_reason: str | None
    active: bool
    description: str


class GrantList(BaseModel):
    grants: list[GrantOut]


class MeOut(BaseModel):
    """``GET /v1/me``: who the credentials belong to."""

    kind: Literal["agent", "approver"]
    name: str
    roles: list[str]
    admin: bool


class DecisionOut(RequestOut):
    """``POST /v1/requests/{id}/decisions``: the request, plus the grants this POST created
    (approve decisions with a ``scope`` other than ``call``); empty otherwise."""

    grants: list[GrantOut] = Field(default_factory=list)


class RequestList(BaseModel):
    requests: list[RequestOut]
    next_offset: int | None


class EventOut(BaseModel):
    """One Server-Sent Event's data (``event:`` is the same ``type``)."""

    type: Literal["created", "decided", "escalated", "expired", "cancelled"]
    id: str
    kind: str
    status: Status
    thread: str
    agent: str | None
    tools: list[str]
    by: str | None
    at: datetime


class AuditRecordOut(BaseModel):
    seq: int
    event: str
    at: datetime
    request_id: str | None
    thread: str | None
    tool: str | None
    tool_call_id: str | None
    actor: str | None
    principal: str | None
    agent: str | None
    rule: str | None
    policy_hash: str | None
    data: dict[str, Any]
    prev_hash: str
    hash: str


class AuditPage(BaseModel):
    records: list[AuditRecordOut]
    next_after_seq: int | None


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    message: str | None = None


class ErrorOut(BaseModel):
    """Every error: a stable ``error`` code, a ``message`` saying what to do next."""

    error: str
    message: str
    field: str | None = None
    request_id: str | None = None
    by: str | None = None
    at: str | None = None
    outcome: str | None = None
    tool_call_id: str | None = None
    resolution: list[CallOutcome] | None = None


def grant_view(grant: Grant, now: datetime) -> dict[str, Any]:
    """The JSON of one grant (see :class:`GrantOut`)."""
    doc = grant.model_dump(mode="json")
    doc["active"] = grant.active(now)
    doc["description"] = grant.describe()
    return doc


def request_view(req: ApprovalRequest, secrets: NameMatcher | None) -> dict[str, Any]:
    """The JSON of ``GET /v1/requests/{id}`` (see :class:`RequestOut`), secret-named
    argument values masked (``secrets``: the policy's ``redact_keys``) for every caller —
    agents merge their own arguments back (see :func:`signoff.policy.redact.merge_edit`)."""
    doc = mask_request(req.to_wire(), secrets)
    doc["deadline"] = doc["expires_at"]
    doc["notices"] = req.reroute_notices()
    doc["matched_rules"] = [
        {"tool_call_id": a["tool_call_id"], "rule": a["rule"], "reason": a["reason"]}
        for a in doc["action_requests"]
    ]
    doc["quorum"] = [
        {"tool_call_id": c["tool_call_id"], "required": c["quorum"], "approvals": c["approvals"]}
        for c in doc["calls"]
    ]
    doc["resolution"] = [_resolution_view(c) for c in doc["calls"]]
    return doc


def _resolution_view(call: dict[str, Any]) -> dict[str, Any]:
    view = {
        "tool_call_id": call["tool_call_id"],
        "resolution": call["resolution"],
        "by": call["resolved_by"],
        "at": call["resolved_at"],
        "message": call["message"],
    }
    if call.get("answers") is not None:  # an inquiry form's answers, keyed by question id
        view["answers"] = call["answers"]
    return view
