"""The request state machine, as pure functions over :class:`ApprovalRequest`.

Every store runs these inside one transaction on the freshest copy of the row, so the rules
(first valid decision wins, quorum, veto, deadlines, exactly-once execution) are written once
and hold for SQLite, PostgreSQL and memory alike.

Each function leaves its argument alone and changes a copy — except with ``in_place=True``,
which the gate passes when the function runs as the mutation of ``Store.update_request``:
every store hands a mutation a private copy of the row (parsed from it, or copied), so a
second copy (a pydantic dump/validate, tens of microseconds) would buy nothing.

That private copy may share the items of ``action_requests``, ``decisions`` and
``review_configs``, and the ``principal``, with the stored snapshot it replaces (the
MemoryStore's copy on write: ``store/memory.py``). So a change *replaces* such an item (its
list is the copy's own) and never changes one in place; calls (``CallState``) are the
copy's own and are changed in place, except their ``action``, which the copy may share too
and a change replaces (an edit, sealing a finished call's secrets).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from signoff.model import chains
from signoff.model._built import assign
from signoff.model.audit import AuditEvent
from signoff.model.errors import (
    AlreadyDecided,
    AlreadyExecuted,
    DecisionError,
    LeaseHeld,
    NotAuthorized,
)
from signoff.model.grants import Grant
from signoff.model.identity import PersonKey, contains_person, person_key, same_person
from signoff.model.outbox import OutboxItem
from signoff.model.requests import (
    Action,
    ActionRequest,
    ApprovalRequest,
    CallState,
    DecisionRecord,
    Execution,
    ReviewConfig,
    deadline_after,
)


@dataclass(frozen=True, slots=True)
class ThreadGrant:
    """An "approve everything on this thread" decision, usable by later requests."""

    thread: str
    approver: str
    request_id: str
    tool_call_id: str
    at: datetime


@dataclass(frozen=True, slots=True)
class Reroute:
    """Where an edit sends its call when the edited call is not the call that was routed:
    the review of the rule the policy picks for the edited arguments."""

    config: ReviewConfig
    rule: str
    reason: str | None = None


@dataclass(slots=True)
class Transition:
    """The new state of a request plus what to audit.

    ``changed`` is False for idempotent repeats (nothing is written).
    """

    request: ApprovalRequest
    events: list[AuditEvent] = field(default_factory=list)
    changed: bool = True
    grants: list[Grant] = field(default_factory=list)  # created by this change, same commit
    #: messages announcing this change (an escalation's prompts, a new stage's…), stored in
    #: the same commit, so a crash right after it cannot lose them (``gate/changes.py``)
    outbox: list[OutboxItem] = field(default_factory=list)


def _event(
    req: ApprovalRequest,
    kind: str,
    call_id: str | None = None,
    *,
    at: datetime,
    actor: object = None,
    ar: ActionRequest | None = None,
    **data: object,
) -> AuditEvent:
    """The audit event of a change; the other keywords are its ``data`` (a new dict).
    ``ar``: the call's action request, when the caller has it at hand."""
    tool = None
    rule = None
    if call_id is not None:
        if ar is None:
            ar = req.action_request(call_id)
        tool, rule = ar.name, ar.rule
    return AuditEvent(
        event=kind,  # type: ignore[arg-type]
        at=at,
        request_id=req.id,
        thread=req.thread,
        tool=tool,
        tool_call_id=call_id,
        actor=actor if isinstance(actor, str) else None,
        principal=req.principal.id,
        agent=req.agent,
        rule=rule,
        policy_hash=req.policy_hash,
        data=data,
    )


def _already(req: ApprovalRequest, call: CallState | None = None) -> AlreadyDecided:
    outcome: str | None
    if call is not None and call.resolution is not None:
        by, at, outcome = call.resolved_by, call.resolved_at, call.resolution
        what = f"call {call.tool_call_id}"
    else:
        by, at, outcome = _last_actor(req), req.resolved_at, req.status
        what = f"request {req.id}"
    when = at.isoformat(timespec="seconds") if at else "an unknown time"
    who = f" by {by}" if by else ""
    return AlreadyDecided(
        f"{what} was already {outcome}{who} at {when}; nothing was changed",
        request_id=req.id,
        by=by,
        at=at,
        outcome=outcome,
    )


def _last_actor(req: ApprovalRequest) -> str | None:
    resolved = [c for c in req.calls if c.resolved_by]
    return resolved[-1].resolved_by if resolved else None


def may_decide(
    cfg: ReviewConfig,
    req: ApprovalRequest,
    person: str,
    roles: Iterable[str],
    key: PersonKey = person_key,
) -> str | None:
    """None if ``person`` may decide this call, else the reason they may not. Names compare
    by ``key`` (:func:`~signoff.model.identity.person_key`, or the policy's, with aliases)."""
    roles = frozenset(roles)
    allowed = cfg.approvers.admits(person, roles, key)
    escalate_to = cfg.escalate_to
    if cfg.approvers.stages:  # the stage now asked may escalate to a group of its own
        escalate_to = chains.stage_config(cfg, req.call(cfg.tool_call_id)).escalate_to
    if not allowed and req.escalated and escalate_to is not None:
        allowed = escalate_to.admits(person, roles, key)
    if not allowed:
        who = _describe_group(cfg)
        return f"{person} may not decide {cfg.action_name}: it needs {who}"
    return None


def _describe_group(cfg: ReviewConfig) -> str:
    if cfg.approvers.chained:
        return "someone in its approval chain (" + chains.describe(cfg.approvers) + ")"
    parts = []
    if cfg.approvers.roles:
        parts.append("a person with role " + " or ".join(cfg.approvers.roles))
    if cfg.approvers.users:
        parts.append("one of " + ", ".join(cfg.approvers.users))
    if cfg.escalate_to is not None:
        parts.append(
            "(after escalation) " + ", ".join(cfg.escalate_to.roles + cfg.escalate_to.users)
        )
    return " or ".join(parts) or "a listed approver"


def is_self_approval(
    cfg: ReviewConfig, req: ApprovalRequest, approver: str, key: PersonKey = person_key
) -> bool:
    """Whether ``approver`` is the request's principal on a call that forbids self-approval
    (``Erin`` and ``erin`` are one person; so are a person and their aliases under the
    policy's key)."""
    return cfg.forbid_self_approval and same_person(approver, req.principal.id, key)


def _check_self(cfg: ReviewConfig, req: ApprovalRequest, d: DecisionRecord, key: PersonKey) -> None:
    # Rejecting your own agent's call is always allowed: it can only make things safer.
    if d.type != "reject" and is_self_approval(cfg, req, d.approver, key):
        spelled = "" if d.approver == req.principal.id else f" (as {req.principal.id})"
        raise NotAuthorized(
            f"{d.approver} made this call{spelled} and may not {d.type} it "
            "(forbid_self_approval); another approver must decide",
            field="approver",
        )


def apply_decisions(
    req: ApprovalRequest,
    decisions: list[DecisionRecord],
    *,
    approver_roles: Iterable[str],
    now: datetime,
    reroutes: Mapping[str, Reroute] | None = None,
    key: PersonKey = person_key,
    grants: Mapping[str, Grant] | None = None,
    in_place: bool = False,
) -> Transition:
    """Record ``decisions`` (all by one approver) on a fresh copy of ``req`` (on ``req``
    itself with ``in_place``: see the module docstring).

    People compare by ``key`` (self-approval, quorum distinctness, repeats): NFKC + casefold
    by default; pass ``Policy.person_key`` so a person's ``aliases:`` count as them too.

    ``reroutes`` (by call id) holds, for an edit whose edited call the policy sends to another
    rule, other approvers or a larger quorum, where it goes: the call then waits for that
    rule's approvers instead of resolving (see :func:`_reroute`).

    Raises :class:`AlreadyDecided` when the request or a call already has an outcome (unless the
    decision is an exact repeat, which is an idempotent no-op), :class:`NotAuthorized` when the
    approver does not qualify, :class:`DecisionError` for anything else. Nothing is changed when
    it raises.
    """
    roles = frozenset(approver_roles)
    if not decisions:
        raise DecisionError("no decisions given", field="decisions")
    # nothing can repeat a decision on a request without any (the first decision)
    if req.decisions and all(_is_repeat(req, d, key) for d in decisions):
        return Transition(req, changed=False)
    if not req.pending:
        raise _already(req)
    if now >= req.expires_at:
        raise AlreadyDecided(
            f"request {req.id} passed its deadline at "
            f"{req.expires_at.isoformat(timespec='seconds')}; no decision can be taken",
            request_id=req.id,
            outcome="expired",
            at=req.expires_at,
        )
    new = req if in_place else req.copy_for_update()
    tr = Transition(new)
    seen: set[str] = set()
    for i, d in enumerate(decisions):
        try:
            idx = new.index_of(d.tool_call_id)
        except KeyError:
            raise DecisionError(
                f"no call {d.tool_call_id!r} in request {req.id}",
                field=f"decisions[{i}].tool_call_id",
            ) from None
        if d.tool_call_id in seen:
            raise DecisionError(
                f"two decisions for call {d.tool_call_id}", field=f"decisions[{i}].tool_call_id"
            )
        seen.add(d.tool_call_id)
        cfg, call = new.review_configs[idx], new.calls[idx]
        if req.decisions and _is_repeat(req, d, key):
            continue
        if call.resolution is not None:
            raise _already(req, req.calls[idx])
        if d.type not in cfg.allowed_decisions:
            raise DecisionError(
                f"decision type {d.type!r} is not allowed for {cfg.action_name}; "
                f"allowed: {', '.join(cfg.allowed_decisions)}",
                field=f"decisions[{i}].type",
            )
        refusal = may_decide(cfg, new, d.approver, roles, key)
        if refusal:
            raise NotAuthorized(refusal, field="approver")
        _check_self(cfg, new, d, key)
        if cfg.approvers.chained and d.type in ("approve", "edit"):
            edit = d.type == "edit"
            why = chains.refusal(
                cfg, call, d.approver, roles, escalated=new.escalated, key=key, edit=edit
            )
            if why:
                raise NotAuthorized(why, field="approver")
        reroute = (reroutes or {}).get(d.tool_call_id) if d.type == "edit" else None
        if reroute is not None:
            _reroute(new, tr, idx, d, reroute, roles, now, key)
        else:
            _apply_one(new, tr, idx, d, now, key, (grants or {}).get(d.tool_call_id), roles)
    if all(c.resolution is not None for c in new.calls):
        assign(new, {"status": "resolved", "resolved_at": now, "version": new.version + 1})
        tr.events.append(
            _event(
                new, "resolved", at=now, outcomes={c.tool_call_id: c.resolution for c in new.calls}
            )
        )
    else:
        assign(new, {"version": new.version + 1})
    return tr


def _is_repeat(req: ApprovalRequest, d: DecisionRecord, key: PersonKey) -> bool:
    """True when ``d`` repeats a decision of the current round on its call (an edit starts a
    new round: approving the edited call again is a new decision, not a repeat)."""
    for old in reversed(req.decisions):
        if old.tool_call_id != d.tool_call_id:
            continue
        if d.same_as(old, key):
            # at a later stage of a chain, the same approve again is a new one (refused when
            # distinct: true, counted for this stage otherwise)
            if d.type != "approve" or req.call(d.tool_call_id).resolution is not None:
                return True
            cfg, call = req.config(d.tool_call_id), req.call(d.tool_call_id)
            return chains.counted_now(cfg, call, d.approver, key)
        if old.type == "edit":
            return False
    return False


def _apply_one(
    new: ApprovalRequest,
    tr: Transition,
    idx: int,
    d: DecisionRecord,
    now: datetime,
    key: PersonKey,
    grant: Grant | None = None,
    roles: frozenset[str] = frozenset(),
) -> None:
    call, cfg = new.calls[idx], new.review_configs[idx]
    new.decisions.append(d)
    scope = d.scope if isinstance(d.scope, str) else d.scope.model_dump(by_alias=True)
    data: dict[str, Any] = {"type": d.type, "channel": d.channel, "scope": scope}
    if d.os_user:
        data["os_user"] = d.os_user
    if d.message:
        data["message"] = d.message
    if d.answers is not None:
        data["answers"] = d.answers
    stage_started = False
    if d.type == "approve":
        if cfg.approvers.chained:
            if not chains.count(cfg, call, d.approver, roles, key):
                data["counted"] = False
            stage_started = chains.advance(cfg, call)
        # Quorum counts people, not spellings of one name. A repeat by someone already
        # counted (a new message, an approve after their own edit) is recorded and audited
        # like any change of the row, but not counted again.
        elif contains_person(call.approvals, d.approver, key):
            data["counted"] = False
        else:
            call.approvals.append(d.approver)
        data["quorum"] = f"{len(call.approvals)}/{call.quorum}"
        if chains.complete(cfg, call):
            original = new.action_requests[idx]
            edited = call.action.args != original.args
            _resolve(call, "edited" if edited else "approved", d, now)
        if grant is not None:  # built and checked by the gate (scope, rule, expiry, creator)
            tr.grants.append(grant)
            data["grant_id"] = grant.id
            tr.events.append(_grant_event(grant, now))
    elif d.type == "edit":
        assert d.edited_action is not None  # checked by the gate before it gets here
        call.action = Action(name=call.action.name, args=dict(d.edited_action.args))
        data["edited_args"] = d.edited_action.args
        if cfg.approvers.chained:  # an edit restarts the chain at stage 1
            stage_started = _restart_chain(new, idx, d.approver, roles, key)
        else:
            call.approvals = [d.approver]  # an edit restarts the count on the edited call
        data["quorum"] = f"{len(call.approvals)}/{call.quorum}"
        if chains.complete(cfg, call):
            _resolve(call, "edited", d, now)
    elif d.type == "reject":
        _resolve(call, "rejected", d, now)  # one qualified reject vetoes
    else:
        _resolve(call, "responded", d, now)
    if cfg.approvers.chained:
        data["progress"] = chains.progress(cfg, call)
    ar = new.action_requests[idx]
    tr.events.append(
        _event(new, "decided", d.tool_call_id, ar=ar, at=now, actor=d.approver, **data)
    )
    if stage_started and call.resolution is None:
        _start_stage(new, tr, idx, now, restarted=d.type == "edit")


def _restart_chain(
    new: ApprovalRequest, idx: int, editor: str, roles: frozenset[str], key: PersonKey
) -> bool:
    """Back to stage 1 with nobody counted, then the editor counts if stage 1 admits them
    (not their own call: that was refused before). True when a stage (re)starts."""
    cfg, call = new.review_configs[idx], new.calls[idx]
    chains.fresh(cfg, call)
    if (
        may_decide(cfg, new, editor, roles, key) is None
        and not is_self_approval(cfg, new, editor, key)
        and chains.refusal(cfg, call, editor, roles, escalated=False, key=key) is None
    ):
        chains.count(cfg, call, editor, roles, key)
        chains.advance(cfg, call)
    return bool(cfg.approvers.stages)


def _start_stage(
    new: ApprovalRequest, tr: Transition, idx: int, now: datetime, *, restarted: bool
) -> None:
    """A stage of a ``stages`` chain starts: the request's deadline and escalation become
    the stage's (its own ``timeout``/``on_timeout`` or the review's), and the
    ``stage_started`` event tells the notification planner to ask the stage's people."""
    cfg, call = new.review_configs[idx], new.calls[idx]
    eff = chains.stage_config(cfg, call)
    new.expires_at = deadline_after(now, eff.timeout_s)
    new.escalated = False
    new.escalate_at = None
    if eff.on_timeout == "escalate":
        new.escalate_at = deadline_after(now, eff.escalate_after_s or eff.timeout_s / 2)
    tr.events.append(
        _event(
            new,
            "stage_started",
            call.tool_call_id,
            at=now,
            actor="system",
            stage=call.stage + 1,
            of=len(cfg.approvers.groups),
            progress=chains.progress(cfg, call),
            expires_at=new.expires_at.isoformat(),
            restarted=restarted,
        )
    )


def _reroute(
    new: ApprovalRequest,
    tr: Transition,
    idx: int,
    d: DecisionRecord,
    reroute: Reroute,
    roles: frozenset[str],
    now: datetime,
    key: PersonKey = person_key,
) -> None:
    """The one rule for edits that change the routing: the edit is recorded as proposed, the
    call moves to the new rule's review (approvers, quorum, deadline handling), and the
    editor's approval counts only if the editor qualifies under the new rule."""
    call, action = new.calls[idx], new.action_requests[idx]
    assert d.edited_action is not None  # checked by the gate before it gets here
    from_rule = action.rule
    new.decisions.append(d)
    call.action = Action(name=call.action.name, args=dict(d.edited_action.args))
    new.review_configs[idx] = reroute.config
    # replaced, not changed: a store's working copy may share the item (module docstring)
    new.action_requests[idx] = action.model_copy(
        update={"rule": reroute.rule, "reason": reroute.reason}
    )
    call.quorum = reroute.config.approvers.quorum
    chains.fresh(reroute.config, call)  # no progress of the old rule's chain carries over
    if reroute.config.approvers.chained:
        _restart_chain(new, idx, d.approver, roles, key)
        counted = bool(call.approvals)
    else:
        counted = may_decide(
            reroute.config, new, d.approver, roles, key
        ) is None and not is_self_approval(reroute.config, new, d.approver, key)
        call.approvals = [d.approver] if counted else []
    call.rerouted_from = from_rule
    data: dict[str, Any] = {
        "type": "edit",
        "channel": d.channel,
        "edited_args": d.edited_action.args,
        "from_rule": from_rule,
        "to_rule": reroute.rule,
        "approvers": reroute.config.approvers.model_dump(),
        "editor_counted": counted,
        "quorum": f"{len(call.approvals)}/{call.quorum}",
    }
    if d.message:
        data["message"] = d.message
    if reroute.config.approvers.chained:
        data["progress"] = chains.progress(reroute.config, call)
    tr.events.append(_event(new, "edit_rerouted", d.tool_call_id, at=now, actor=d.approver, **data))
    if chains.complete(reroute.config, call):
        _resolve(call, "edited", d, now)
    elif reroute.config.approvers.stages:
        _start_stage(new, tr, idx, now, restarted=True)


def _grant_event(grant: Grant, now: datetime) -> AuditEvent:
    """The ``grant_created`` audit event (the whole grant: what it covers, until when)."""
    return AuditEvent(
        event="grant_created",
        at=now,
        request_id=grant.source_request,
        thread=grant.thread,
        tool=grant.tool,
        tool_call_id=grant.source_call,
        actor=grant.created_by,
        principal=grant.principal,
        agent=grant.agent,
        rule=grant.rule,
        data={"grant": grant.model_dump(mode="json")},
    )


def grant_created_event(grant: Grant, now: datetime) -> AuditEvent:
    """The audit event of a grant created outside a decision (CLI, API)."""
    return _grant_event(grant, now)


def _resolve(call: CallState, resolution: str, d: DecisionRecord, now: datetime) -> None:
    assign(
        call,
        {
            "resolution": resolution,
            "message": d.message,
            "answers": d.answers,
            "resolved_by": d.approver,
            "resolved_at": now,
        },
    )


def due_transition(req: ApprovalRequest, now: datetime) -> Transition | None:
    """Escalate or expire ``req`` if it is due at ``now``; None when nothing is due."""
    if not req.pending or now < req.due_at:
        return None
    new = req.copy_for_update()
    tr = Transition(new)
    # a chain's current stage brings its own deadline handling
    configs = [
        chains.stage_config(c, call) for c, call in zip(new.review_configs, new.calls, strict=True)
    ]
    if new.escalate_at is not None and not new.escalated and now < new.expires_at:
        new.escalated = True
        extension = max((c.timeout_s for c in configs if c.on_timeout == "escalate"), default=0.0)
        new.expires_at = deadline_after(new.expires_at, extension)
        tr.events.append(
            _event(new, "escalated", at=now, actor="system", expires_at=new.expires_at.isoformat())
        )
        new.version += 1
        return tr
    late_extension = max((c.timeout_s for c in configs if c.on_timeout == "escalate"), default=0.0)
    if new.escalate_at is not None and not new.escalated and late_extension > 0:
        # Nobody swept before the deadline (e.g. the process was down): escalate now and give
        # the new group the full extension from now, as promised. Without an extension the
        # deadline holds and the request expires below.
        _escalated_late(new, now, late_extension)
        new.escalated = True
        tr.events.append(
            _event(
                new,
                "escalated",
                at=now,
                actor="system",
                late=True,
                expires_at=new.expires_at.isoformat(),
            )
        )
        new.version += 1
        return tr
    for call, cfg in zip(new.calls, configs, strict=True):
        if call.resolution is not None:
            continue
        call.resolved_by = "timeout"
        call.resolved_at = now
        call.resolution = "approved" if cfg.on_timeout == "allow" else "expired"
        call.message = (
            "no decision before the deadline; on_timeout: allow"
            if cfg.on_timeout == "allow"
            else "no decision before the deadline"
        )
    new.status = "expired"
    new.resolved_at = now
    tr.events.append(
        _event(
            new,
            "expired",
            at=now,
            actor="system",
            outcomes={c.tool_call_id: c.resolution for c in new.calls},
        )
    )
    new.version += 1
    return tr


def _escalated_late(req: ApprovalRequest, now: datetime, extension: float) -> ApprovalRequest:
    req.escalate_at = now
    req.expires_at = deadline_after(now, extension)
    return req


def cancel(req: ApprovalRequest, *, actor: str, reason: str | None, now: datetime) -> Transition:
    """Cancel a pending request; every undecided call resolves ``cancelled``."""
    if not req.pending:
        if req.status == "cancelled":
            return Transition(req, changed=False)
        raise _already(req)
    new = req.copy_for_update()
    for call in new.calls:
        if call.resolution is None:
            call.resolution = "cancelled"
            call.resolved_by = actor
            call.resolved_at = now
            call.message = reason
    new.status = "cancelled"
    new.resolved_at = now
    tr = Transition(new, [_event(new, "cancelled", at=now, actor=actor, reason=reason)])
    new.version += 1
    return tr


ExecutionStep = Literal["executing", "executed", "failed"]
#: What a system actor answers for one call: its resolution and the message with it.
SystemOutcome = tuple[Literal["approved", "rejected"], str | None]


def mark_execution(
    req: ApprovalRequest,
    tool_call_id: str,
    step: Execution,
    *,
    now: datetime,
    error: str | None = None,
    actor: str | None = None,
    in_place: bool = False,
) -> Transition:
    """Advance the exactly-once ledger of one call: ``executing`` → ``executed | failed``.

    Claiming ``executing`` succeeds once; a second claim raises :class:`AlreadyExecuted`.
    ``in_place``: see the module docstring.
    """
    new = req if in_place else req.copy_for_update()
    idx = new.index_of(tool_call_id)
    call = new.calls[idx]
    name = call.action.name
    if step == "executing":
        if not call.runnable:
            raise AlreadyExecuted(
                f"call {tool_call_id} is {call.resolution or 'undecided'}; it may not run",
                call_id=tool_call_id,
                tool=name,
                request_id=req.id,
            )
        if call.execution is not None:
            raise AlreadyExecuted(
                f"call {tool_call_id} ({name}) is already {call.execution}"
                + (
                    " — it was interrupted and needs a human to reconcile it"
                    if call.execution == "executing"
                    else ""
                )
                + "; exactly-once execution forbids running it again",
                call_id=tool_call_id,
                tool=name,
                request_id=req.id,
            )
    elif call.execution != "executing":
        raise AlreadyExecuted(
            f"call {tool_call_id} was not executing (it is {call.execution or 'not started'})",
            call_id=tool_call_id,
            tool=name,
            request_id=req.id,
        )
    assign(call, {"execution": step, "execution_at": now, "execution_error": error})
    data: dict[str, Any] = {"args": call.action.args} if step == "executing" else {}
    if error:
        data["error"] = error
    ar = new.action_requests[idx]
    tr = Transition(new, [_event(new, step, tool_call_id, ar=ar, at=now, actor=actor, **data)])
    assign(new, {"version": new.version + 1})
    return tr


def system_resolve(
    req: ApprovalRequest,
    resolution: Literal["approved", "rejected"],
    *,
    actor: str,
    message: str | None,
    now: datetime,
    outcomes: Callable[[CallState], SystemOutcome | None] | None = None,
) -> Transition:
    """Resolve every undecided call without a human: ``non-interactive`` mode rejects at once
    (or, per call, answers what ``outcomes`` says), ``yolo`` mode approves at once. Audited as
    ``decided`` with the system actor."""
    if not req.pending:
        raise _already(req)
    new = req.copy_for_update()
    tr = Transition(new)
    for call in new.calls:
        if call.resolution is not None:
            continue
        own = outcomes(call) if outcomes is not None else None
        outcome, said = own if own is not None else (resolution, message)
        call.resolution = outcome
        call.resolved_by = actor
        call.resolved_at = now
        call.message = said
        tr.events.append(
            _event(
                new,
                "decided",
                call.tool_call_id,
                at=now,
                actor=actor,
                type="approve" if outcome == "approved" else "reject",
                channel=actor,
                message=said,
            )
        )
    new.status = "resolved"
    new.resolved_at = now
    tr.events.append(
        _event(
            new,
            "resolved",
            at=now,
            actor=actor,
            outcomes={c.tool_call_id: c.resolution for c in new.calls},
        )
    )
    new.version += 1
    return tr


def take_lease(
    req: ApprovalRequest,
    waiter: str,
    *,
    until: datetime,
    now: datetime,
    reattach: bool,
    in_place: bool = False,
) -> Transition:
    """Hold (or renew) the waiter's lease on ``req`` (``in_place``: see the module
    docstring).

    With ``reattach`` the caller is taking over someone else's request: allowed only once the
    current lease has lapsed (two live runs never share one approval), audited ``reattached``.
    A renewal by the holder writes no audit event.
    """
    held = req.lease_until is not None and req.lease_until > now and req.waiter != waiter
    if held:
        raise LeaseHeld(
            f"request {req.id} is being waited on by {req.waiter} until "
            f"{req.lease_until.isoformat(timespec='seconds') if req.lease_until else '?'}",
            request_id=req.id,
        )
    new = req if in_place else req.copy_for_update()
    new.waiter, new.lease_until = waiter, until
    new.version += 1
    events = []
    if reattach:
        events.append(_event(new, "reattached", at=now, actor=waiter, previous_waiter=req.waiter))
    return Transition(new, events)


def reconcile(
    req: ApprovalRequest,
    tool_call_id: str,
    outcome: Execution,
    *,
    actor: str,
    message: str | None,
    now: datetime,
    interrupted_before: datetime,
) -> Transition:
    """A human records how an interrupted execution ended (``executed`` or ``failed``).

    Only a call still ``executing`` whose claim is older than ``interrupted_before`` (the
    gate's ``execution_timeout``) can be reconciled: a younger claim may still be running.
    """
    if outcome not in ("executed", "failed"):
        raise DecisionError("the outcome is executed or failed", field="outcome")
    new = req.copy_for_update()
    call = new.call(tool_call_id)
    if call.execution != "executing":
        raise DecisionError(
            f"call {tool_call_id} is {call.execution or 'not started'}, not interrupted; "
            "there is nothing to reconcile",
            field="call",
        )
    if call.execution_at is not None and call.execution_at > interrupted_before:
        raise DecisionError(
            f"call {tool_call_id} started at {call.execution_at.isoformat(timespec='seconds')} "
            "and may still be running; reconcile it once gate.execution_timeout has passed",
            field="call",
        )
    call.execution = outcome
    call.execution_at = now
    call.execution_error = message if outcome == "failed" else None
    new.version += 1
    data: dict[str, Any] = {"outcome": outcome}
    if message:
        data["message"] = message
    event = _event(new, "reconciled", tool_call_id, at=now, actor=actor, **data)
    return Transition(new, [event])
