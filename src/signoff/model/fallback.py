"""The fallback judge of an inquiry, as pure transitions (see ``inquiries.fallback``).

Three steps, each one conditional update of the request, so they hold across processes and
replicas like every other change: the sweeper that finds the fallback due *claims* it
(``asking`` until a lease ends; a claimer that dies is replaced once the lease lapses), the
judge's answer is recorded as a ``respond`` decision by the system actor ``judge:NAME`` —
checked by :func:`~signoff.model.inquiries.check_response` exactly like a human's — or the
failure is recorded and the inquiry stays pending for the humans until its deadline.

Only inquiries: :func:`judge_respond` refuses any other request, so a judge can never
approve (or reject) a tool call.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from signoff.model.errors import AlreadyDecided, DecisionError, NotAuthorized
from signoff.model.inquiries import check_response
from signoff.model.requests import ApprovalRequest, DecisionRecord
from signoff.model.resolution import Transition, _already, _event

#: The decision channel (and actor prefix) of a judge's answer.
JUDGE_CHANNEL = "judge"
#: How many times the fallback is claimed before it is given up (a claimer died each time).
MAX_ATTEMPTS = 2


def judge_actor(judge: str) -> str:
    """``judge:NAME``: who answered, on the request, in the audit and on every surface."""
    return f"{JUDGE_CHANNEL}:{judge}"


def is_judge(actor: str | None) -> bool:
    return bool(actor) and str(actor).startswith(f"{JUDGE_CHANNEL}:")


def shown_actor(actor: str) -> str:
    """Who decided, as surfaces print it: a judge is labelled as a model, not a person."""
    return f"{actor} (a model, not a human)" if is_judge(actor) else actor


def fallback_due(req: ApprovalRequest, now: datetime) -> bool:
    """Whether ``req`` is a pending inquiry whose fallback the sweeper must take now."""
    if not req.pending or req.kind != "inquiry" or req.fallback is None:
        return False
    due = req.fallback.due()
    return due is not None and due <= now and now < req.expires_at


def claim_fallback(req: ApprovalRequest, *, now: datetime, lease_s: float) -> Transition:
    """Take the due fallback for ``lease_s`` (unchanged when it is not due: another process
    took it first). After :data:`MAX_ATTEMPTS` claims that ended without an answer, the
    fallback fails instead of asking again."""
    if not fallback_due(req, now):
        return Transition(req, changed=False)
    new = req.copy_for_update()
    fb = new.fallback
    assert fb is not None
    if fb.attempts >= MAX_ATTEMPTS:
        reason = f"the judge was asked {fb.attempts} times and no answer was recorded"
        return _failed(new, reason, now)
    fb.state = "asking"
    fb.attempts += 1
    fb.claimed_until = now + timedelta(seconds=lease_s)
    new.version += 1
    event = _event(
        new,
        "fallback_asked",
        new.calls[0].tool_call_id,
        at=now,
        actor=judge_actor(fb.judge),
        judge=fb.judge,
        attempt=fb.attempts,
    )
    return Transition(new, [event])


def fallback_failed(req: ApprovalRequest, reason: str, *, now: datetime) -> Transition:
    """The judge gave no valid answer: audited, and the inquiry stays with the humans."""
    if req.fallback is None or req.fallback.state in ("answered", "failed"):
        return Transition(req, changed=False)
    return _failed(req.copy_for_update(), reason, now)


def _failed(new: ApprovalRequest, reason: str, now: datetime) -> Transition:
    fb = new.fallback
    assert fb is not None
    fb.state, fb.error, fb.claimed_until = "failed", reason[:500], None
    new.version += 1
    event = _event(
        new,
        "fallback_failed",
        new.calls[0].tool_call_id,
        at=now,
        actor=judge_actor(fb.judge),
        judge=fb.judge,
        error=fb.error,
    )
    return Transition(new, [event])


def judge_respond(
    req: ApprovalRequest,
    judge: str,
    *,
    message: str | None,
    answers: Mapping[str, Any] | None,
    now: datetime,
) -> Transition:
    """Record the judge's answer as the inquiry's ``respond`` decision (actor ``judge:NAME``).

    Raises :class:`NotAuthorized` for anything but an inquiry (judges never decide tool
    calls), :class:`AlreadyDecided` when a human (or anyone) answered first — the first
    decision wins, the judge's is refused — and :class:`DecisionError` naming the field when
    the answer is not valid for the inquiry (not one of binding ``choices``, a form field
    missing…), exactly as for a human's answer."""
    if req.kind != "inquiry" or req.inquiry is None:
        raise NotAuthorized(
            f"request {req.id} is a {req.kind}: judges answer inquiries only, never tool calls",
            field="approver",
        )
    if not req.pending:
        raise _already(req)
    if now >= req.expires_at:
        raise AlreadyDecided(
            f"request {req.id} passed its deadline; the judge's answer came too late",
            request_id=req.id,
            outcome="expired",
            at=req.expires_at,
        )
    (call,) = [c for c in req.calls]
    if call.resolution is not None:
        raise _already(req, call)
    cfg = req.config(call.tool_call_id)
    if "respond" not in cfg.allowed_decisions:
        raise DecisionError("this inquiry takes no respond decision", field="type")
    checked_message, checked_answers = check_response(req.inquiry, message, answers, "answer")
    actor = judge_actor(judge)
    new = req.copy_for_update()
    record = DecisionRecord(
        tool_call_id=call.tool_call_id,
        type="respond",
        message=checked_message,
        answers=checked_answers,
        approver=actor,
        channel=JUDGE_CHANNEL,
        at=now,
    )
    new.decisions.append(record)
    state = new.calls[0]
    state.resolution = "responded"
    state.message = checked_message
    state.answers = checked_answers
    state.resolved_by = actor
    state.resolved_at = now
    new.status = "resolved"
    new.resolved_at = now
    if new.fallback is not None:
        new.fallback.state, new.fallback.claimed_until = "answered", None
    new.version += 1
    tr = Transition(new)
    tr.events.append(
        _event(
            new,
            "decided",
            call.tool_call_id,
            at=now,
            actor=actor,
            type="respond",
            channel=JUDGE_CHANNEL,
            message=checked_message,
            answers=checked_answers,
            model_output=True,
        )
    )
    tr.events.append(
        _event(new, "resolved", at=now, actor=actor, outcomes={call.tool_call_id: "responded"})
    )
    return tr
