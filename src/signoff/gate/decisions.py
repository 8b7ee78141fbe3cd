"""Checking an approver's decisions before anything is stored.

Parsing (wire dicts or :class:`Decision` objects), matching keyed or positional decisions to
calls (LangChain semantics), the per-type rules (allowed types, respond needs an answer,
thread scope only on approve) and edits (editable arguments, the tool's schema, a re-check
by the policy). Every refusal is a :class:`DecisionError` naming the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_args

from pydantic import ValidationError

from signoff.checks import schema_for
from signoff.gate.granting import grant_from_decision
from signoff.model import (
    Action,
    ApprovalRequest,
    CallContext,
    Decision,
    DecisionError,
    DecisionRecord,
    NotAuthorized,
    ReviewConfig,
    ReviewSpec,
    ToolCall,
    utcnow,
)
from signoff.model._built import built
from signoff.model.grants import Grant, GrantRequest
from signoff.model.inquiries import check_response
from signoff.model.requests import Scope
from signoff.model.resolution import Reroute, Transition, apply_decisions
from signoff.model.verdicts import DECISION_TYPES
from signoff.policy import Policy
from signoff.policy.redact import restore, secret_changes

if TYPE_CHECKING:
    from signoff.gate.core import Gate

_MISSING = object()


async def decide(
    gate: Gate,
    request_id: str,
    decisions: Sequence[Decision | Mapping[str, Any]],
    *,
    approver: str | None,
    channel: str,
    approver_roles: Iterable[str] | None,
) -> ApprovalRequest:
    """Validate one approver's decisions and apply them in one store transaction."""
    if not approver:
        raise DecisionError("say who decides (approver)", field="approver")
    who = approver
    check_known_person(gate.policy, who)
    roles = frozenset(approver_roles) if approver_roles is not None else gate.policy.roles_of(who)
    parsed = parse_decisions(decisions)

    def mutate(fresh: ApprovalRequest) -> Transition:
        # Validated against the freshest row inside the write transaction: one store round
        # trip instead of a read then a write, and positional decisions line up with what is
        # pending *now*. Raising here stores nothing.
        checked = checked_decisions(gate, fresh, parsed, approver=who, channel=channel)
        return apply_decisions(
            fresh,
            checked.records,
            approver_roles=roles,
            now=utcnow(),
            reroutes=checked.reroutes,
            key=gate.policy.person_key,
            grants=checked.grants,
            in_place=True,  # the store's private copy
        )

    tr = await gate.update(request_id, mutate)
    for grant in tr.grants:  # effective for this process at once; others within a second
        gate.grant_cache.put(grant)
    await gate.after_change(tr)
    return tr.request


def parse_decisions(decisions: Sequence[Decision | Mapping[str, Any]]) -> list[Decision]:
    """Decisions as objects; a malformed one raises naming ``decisions[i].field``."""
    if isinstance(decisions, Mapping):
        raise DecisionError("expected a list of decisions", field="decisions")
    parsed = []
    for i, d in enumerate(decisions):
        if isinstance(d, Decision):
            parsed.append(d)
            continue
        try:
            parsed.append(Decision.model_validate(d))
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise DecisionError(
                err["msg"], field=f"decisions[{i}]" + (f".{loc}" if loc else "")
            ) from None
    if not parsed:
        raise DecisionError("no decisions given", field="decisions")
    return parsed


def assign_call_ids(req: ApprovalRequest, decisions: list[Decision]) -> list[str]:
    """Keyed decisions keep their ids; a positional list must answer every call (LangChain
    semantics) or every call still awaiting a decision."""
    keyed = [d.tool_call_id for d in decisions if d.tool_call_id is not None]
    if len(keyed) == len(decisions):
        return keyed
    if keyed:
        raise DecisionError(
            "mix of keyed and positional decisions; give tool_call_id on all or none",
            field="decisions",
        )
    all_ids = [c.tool_call_id for c in req.calls]
    pending = req.pending_call_ids
    if len(decisions) == len(all_ids):
        return all_ids
    if len(decisions) == len(pending):
        return pending
    raise DecisionError(
        f"number of decisions ({len(decisions)}) does not match the number of "
        f"calls awaiting a decision ({len(pending)})",
        field="decisions",
    )


def check_known_person(policy: Policy, who: str) -> None:
    """With a ``people:`` directory, only people listed there may decide."""
    if policy.people and who not in policy.people:
        raise NotAuthorized(
            f"{who!r} is not in the people: directory of this policy; "
            f"known: {', '.join(sorted(policy.people))}",
            field="approver",
        )


def validate_decisions(
    gate: Gate,
    req: ApprovalRequest,
    decisions: Sequence[Decision | Mapping[str, Any]],
    *,
    approver: str,
    channel: str,
) -> list[DecisionRecord]:
    """Parse and check decisions against the request without storing anything."""
    return checked_decisions(gate, req, decisions, approver=approver, channel=channel).records


@dataclass(slots=True)
class Checked:
    """Decisions ready for the state machine: the records, where re-routed edits go, and the
    grants approvals with a wider scope create (written in the same transaction)."""

    records: list[DecisionRecord] = field(default_factory=list)
    reroutes: dict[str, Reroute] = field(default_factory=dict)
    grants: dict[str, Grant] = field(default_factory=dict)


def checked_decisions(
    gate: Gate,
    req: ApprovalRequest,
    decisions: Sequence[Decision | Mapping[str, Any]],
    *,
    approver: str,
    channel: str,
) -> Checked:
    """The decisions as records, where each edit that changes the routing sends its call, and
    the grants wider approvals create."""
    parsed = parse_decisions(decisions)
    out = Checked()
    targets = assign_call_ids(req, parsed)
    call_ids = {c.tool_call_id for c in req.calls}
    now = utcnow()
    for i, (d, call_id) in enumerate(zip(parsed, targets, strict=True)):
        where = f"decisions[{i}]"
        if call_id not in call_ids:
            raise DecisionError(
                f"no call {call_id!r} in request {req.id}; calls: "
                + ", ".join(c.tool_call_id for c in req.calls),
                field=f"{where}.tool_call_id",
            )
        reroute = _check_one(gate, req, call_id, d, where)
        if reroute is not None:
            out.reroutes[call_id] = reroute
        grant = None
        if d.scope != "call":
            scope = GrantRequest(kind="thread") if d.scope == "thread" else d.scope
            assert isinstance(scope, GrantRequest)
            grant = grant_from_decision(gate, req, call_id, scope, approver, d.message, where)
            out.grants[call_id] = grant
        values: dict[str, Any] = {
            "tool_call_id": call_id,
            "type": d.type,
            "edited_action": d.edited_action,
            "message": d.message,
            "answers": d.answers,
            "scope": d.scope,
            "approver": approver,
            "channel": channel,
            "at": now,
            "grant_id": grant.id if grant is not None else None,
        }
        plain = _plain_record(d, call_id, approver, channel)
        out.records.append(built(DecisionRecord, values) if plain else DecisionRecord(**values))
    return out


def _plain_record(d: Decision, call_id: str, approver: str, channel: str) -> bool:
    """True when a record of ``d`` needs no validation: every value is of its field's exact
    type already (``d`` was validated; ``approver`` and ``channel`` come from the caller).
    Answers (validated against another type) and anything else take pydantic's path."""
    return (
        d.answers is None
        and type(d.type) is str
        and d.type in DECISION_TYPES
        and (d.message is None or type(d.message) is str)
        and (d.edited_action is None or type(d.edited_action) is Action)
        and ((type(d.scope) is str and d.scope in _SCOPES) or type(d.scope) is GrantRequest)
        and type(call_id) is str
        and type(approver) is str
        and type(channel) is str
    )


_SCOPES: frozenset[str] = frozenset(get_args(Scope))


def _check_one(
    gate: Gate, req: ApprovalRequest, call_id: str, d: Decision, where: str
) -> Reroute | None:
    cfg = req.config(call_id)
    reroute = None
    if d.type not in cfg.allowed_decisions:
        raise DecisionError(
            f"decision type {d.type!r} is not allowed for {cfg.action_name}; "
            f"allowed: {', '.join(cfg.allowed_decisions)}",
            field=f"{where}.type",
        )
    if d.type == "edit":
        reroute = check_edit(gate, req, call_id, d, where)
    elif d.edited_action is not None:
        raise DecisionError(
            "edited_action is only valid with type 'edit'", field=f"{where}.edited_action"
        )
    if d.type == "respond":
        # Every surface's answer passes here: choices bind unless allow_other.
        d.message, d.answers = check_response(req.inquiry, d.message, d.answers, where)
    elif d.answers is not None:
        raise DecisionError("answers are only valid with type 'respond'", field=f"{where}.answers")
    if d.scope != "call" and d.type != "approve":
        raise DecisionError(
            "a scope other than 'call' (a standing approval) is only valid on an approve decision",
            field=f"{where}.scope",
        )
    return reroute


def check_edit(
    gate: Gate, req: ApprovalRequest, call_id: str, d: Decision, where: str
) -> Reroute | None:
    """Same tool, only editable arguments changed, the schema holds — and the edited call is
    evaluated like a new call: a deny refuses the edit; a different rule, other approvers or
    a larger quorum (``on_error`` included) returns where the call must go instead."""
    original = req.action_request(call_id)
    cfg = req.config(call_id)
    edited = d.edited_action
    if edited is None:
        raise DecisionError(
            "an edit needs edited_action {name, args}", field=f"{where}.edited_action"
        )
    if edited.name != original.name:
        raise DecisionError(
            f"an edit cannot switch tools ({original.name} → {edited.name})",
            field=f"{where}.edited_action.name",
        )
    # Secret-named arguments are never editable. A value sent back as shown (masked) is the
    # original one; any other change to a secret-named value, at any depth, is refused.
    restored = restore(edited.args, original.args)
    if restored != edited.args:
        d.edited_action = edited = Action(name=edited.name, args=restored)
    touched = secret_changes(original.args, edited.args, gate.policy.secret_keys)
    if touched:
        raise DecisionError(
            f"argument {touched[0]!r} of {original.name} is secret-named and never editable; "
            "leave it as it is (reject the call if it is wrong)",
            field=f"{where}.edited_action.args.{touched[0]}",
        )
    for key in sorted(set(original.args) | set(edited.args)):
        changed = original.args.get(key, _MISSING) != edited.args.get(key, _MISSING)
        if changed and not cfg.may_edit(key):
            raise DecisionError(
                f"argument {key!r} of {original.name} may not be edited; editable: "
                + (", ".join(cfg.editable_args) or "none"),
                field=f"{where}.edited_action.args.{key}",
            )
    info = gate.tools.get(original.name)
    schema = (
        info.schema
        if info and info.schema
        else (schema_for(cfg.args_schema) if cfg.args_schema else None)
    )
    if schema is not None:
        errors = schema.errors(edited.args)
        if errors:
            raise DecisionError(
                "edited arguments do not match the tool's schema: " + "; ".join(errors),
                field=f"{where}.edited_action.args",
            )
    ctx = request_context(req, gate.policy)
    edited_call = ToolCall(original.name, edited.args, id=call_id)
    # The pipeline itself, not Gate.check: this runs inside the store's write transaction.
    verdict = gate.checks.run(edited_call, ctx, gate.tools.get(original.name), None)
    if verdict.denied:
        raise DecisionError(
            f"the edited call is denied by rule {verdict.rule}: {verdict.reason}; "
            "edit it differently or reject it",
            field=f"{where}.edited_action.args",
        )
    if not verdict.needs_approval:
        return None  # the policy would let the edited call run: the edit resolves as before
    spec = verdict.review or ReviewSpec()
    routed = ReviewConfig.of(call_id, original.name, spec, cfg.args_schema)
    if verdict.rule == original.rule and routed.approvers == cfg.approvers:
        return None  # same rule, same approvers: as before (the quorum restarts)
    return Reroute(routed, verdict.rule, verdict.reason)


def request_context(req: ApprovalRequest, policy: Policy) -> CallContext:
    """Rebuild the call context a request was made in (for re-checking edited calls)."""
    return CallContext(
        principal=policy.principal(req.principal.id, req.principal.roles),
        thread=req.thread,
        agent=req.agent,
        environment=req.environment,
        user_request=req.user_request,
        reasoning=req.reasoning,
        attrs=req.attrs,
    )
