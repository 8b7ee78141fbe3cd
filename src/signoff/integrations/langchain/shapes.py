"""Wire shapes of the LangChain integration, as TypedDicts — LangChain's layout, plus ids.

The interrupt value is LangChain's ``HITLRequest`` (``action_requests`` and
``review_configs`` are parallel lists), extended with what LangChain leaves out: the signoff
request id, each call's tool-call id and deciding rule, who may decide, and the deadline. A
client written for ``HumanInTheLoopMiddleware`` reads it unchanged; a client that knows
signoff can key its decisions by tool-call id instead of by position.

The resume value is LangChain's ``{"decisions": [...]}`` (``decisions[i]`` answers
``action_requests[i]``) or ``{"decisions": {tool_call_id: decision}}``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NotRequired, TypedDict

from signoff.integrations.langchain._ids import local
from signoff.model import ApprovalRequest, CallState, chains
from signoff.model import ReviewConfig as ReviewConfig_

DecisionType = Literal["approve", "edit", "reject", "respond"]


class Action(TypedDict):
    """A tool name with arguments (what an edit carries)."""

    name: str
    args: dict[str, Any]


class ActionRequest(TypedDict):
    """One call awaiting review (LangChain's ``ActionRequest`` plus id and rule)."""

    name: str
    args: dict[str, Any]
    description: NotRequired[str]
    tool_call_id: str
    rule: str


class ChainGroup(TypedDict):
    """One group of an approval chain and how far it is: ``approvals`` counted of ``quorum``."""

    roles: list[str]
    users: list[str]
    quorum: int
    approvals: list[str]


class Approvers(TypedDict):
    """Who may decide a call: people with one of ``roles``, or one of ``users``, or anyone.

    An approval chain adds ``stages`` (asked one after the other; ``stage`` is the 0-based
    index of the one asked now) or ``all_of`` (one from each group, any order), each group
    with its progress, and ``progress``, the sentence every surface shows
    ("stage 2 of 2: 1 of 2 finance approvals")."""

    roles: list[str]
    users: list[str]
    quorum: int
    any: bool
    stages: NotRequired[list[ChainGroup]]
    all_of: NotRequired[list[ChainGroup]]
    stage: NotRequired[int]
    distinct: NotRequired[bool]
    progress: NotRequired[str]


class ReviewConfig(TypedDict):
    """How a call may be reviewed (LangChain's ``ReviewConfig`` plus id and approvers)."""

    action_name: str
    allowed_decisions: list[DecisionType]
    args_schema: NotRequired[dict[str, Any]]
    tool_call_id: str
    editable_args: list[str] | Literal["*"]
    approvers: Approvers


class HITLRequest(TypedDict):
    """The interrupt value: the calls still awaiting a decision in one signoff request."""

    action_requests: list[ActionRequest]
    review_configs: list[ReviewConfig]
    request_id: str
    tool_call_ids: list[str]
    rule_ids: list[str]
    expires_at: str
    thread: str


class ApproveDecision(TypedDict):
    type: Literal["approve"]
    tool_call_id: NotRequired[str]
    message: NotRequired[str]
    scope: NotRequired[Literal["call", "thread"]]


class EditDecision(TypedDict):
    type: Literal["edit"]
    edited_action: Action
    tool_call_id: NotRequired[str]


class RejectDecision(TypedDict):
    type: Literal["reject"]
    message: NotRequired[str]
    tool_call_id: NotRequired[str]


class RespondDecision(TypedDict):
    type: Literal["respond"]
    message: str
    tool_call_id: NotRequired[str]


Decision = ApproveDecision | EditDecision | RejectDecision | RespondDecision


class HITLResponse(TypedDict):
    """The resume value: positional decisions (LangChain) or decisions keyed by tool-call id."""

    decisions: list[Decision] | dict[str, Decision]
    request_id: NotRequired[str]


class InterruptOnConfig(TypedDict):
    """One tool's entry in ``interrupt_on`` (LangChain's ``InterruptOnConfig``)."""

    allowed_decisions: list[DecisionType]
    description: NotRequired[str | Callable[..., str]]
    args_schema: NotRequired[dict[str, Any]]
    when: NotRequired[Callable[[Any], bool]]


_DECISION_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type"],
    "properties": {
        "type": {"enum": ["approve", "edit", "reject", "respond"]},
        "tool_call_id": {"type": "string"},
        "message": {"type": "string"},
        "scope": {"enum": ["call", "thread"]},
        "edited_action": {
            "type": "object",
            "required": ["name", "args"],
            "properties": {"name": {"type": "string"}, "args": {"type": "object"}},
        },
    },
}

#: Published as the interrupt's ``response_schema`` so UIs can render a typed form.
RESUME_JSON_SCHEMA: dict[str, Any] = {
    "title": "HITLResponse",
    "type": "object",
    "required": ["decisions"],
    "properties": {
        "request_id": {"type": "string"},
        "decisions": {
            "oneOf": [
                {"type": "array", "items": _DECISION_JSON_SCHEMA},
                {"type": "object", "additionalProperties": _DECISION_JSON_SCHEMA},
            ]
        },
    },
}


def hitl_request(req: ApprovalRequest, prefix: str = "") -> HITLRequest:
    """The interrupt value for ``req``: its calls that still await a decision.

    ``prefix`` is stripped from the stored call ids: the middleware stores
    ``<AI message id>:<tool-call id>`` and shows LangChain's own tool-call ids.
    """
    pending = set(req.pending_call_ids)
    actions: list[ActionRequest] = []
    configs: list[ReviewConfig] = []
    for action, config in zip(req.action_requests, req.review_configs, strict=True):
        if action.tool_call_id not in pending:
            continue
        actions.append(
            ActionRequest(
                name=action.name,
                args=dict(action.args),
                description=action.description,
                tool_call_id=local(prefix, action.tool_call_id),
                rule=action.rule,
            )
        )
        review = ReviewConfig(
            action_name=config.action_name,
            allowed_decisions=list(config.allowed_decisions),
            tool_call_id=local(prefix, config.tool_call_id),
            editable_args=config.editable_args,
            approvers=_approvers(config, req.call(config.tool_call_id)),
        )
        if config.args_schema is not None:
            review["args_schema"] = config.args_schema
        configs.append(review)
    return HITLRequest(
        action_requests=actions,
        review_configs=configs,
        request_id=req.id,
        tool_call_ids=[a["tool_call_id"] for a in actions],
        rule_ids=[a["rule"] for a in actions],
        expires_at=req.expires_at.isoformat(),
        thread=req.thread,
    )


def is_signoff_interrupt(value: object) -> bool:
    """True for an interrupt value raised by :class:`SignoffMiddleware`."""
    return isinstance(value, dict) and "request_id" in value and "action_requests" in value


def _approvers(config: ReviewConfig_, call: CallState) -> Approvers:
    """The approvers of one call, with its chain's per-group progress when it has one."""
    who = config.approvers
    out = Approvers(roles=list(who.roles), users=list(who.users), quorum=who.quorum, any=who.any)
    if not who.chained:
        return out
    done = call.group_approvals
    groups = [
        ChainGroup(
            roles=list(g.roles),
            users=list(g.users),
            quorum=g.quorum,
            approvals=list(done[i]) if i < len(done) else [],
        )
        for i, g in enumerate(who.groups)
    ]
    if who.stages:
        out["stages"] = groups
        out["stage"] = call.stage
    else:
        out["all_of"] = groups
    out["distinct"] = who.distinct
    out["progress"] = chains.progress(config, call)
    return out
