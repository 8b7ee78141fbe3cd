"""What the audit log says happened to each request, and where a request row disagrees.

Every change of a request row is committed with its audit events in one transaction, so
the row and the log must tell the same story. :class:`Trail` folds one request's events
into that story; :func:`disagreements` lists, in one sentence each, where the stored row
tells another (a rejected call flipped to approved, a request reopened, a decision by
someone the log never saw…).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from signoff.model import ApprovalRequest, AuditRecord, CallState

TERMINAL_EVENTS = ("resolved", "expired", "cancelled")  # also the statuses they lead to
DECISION_EVENTS = ("decided", "auto_approved", "edit_rerouted")
EXECUTION_EVENTS = ("executing", "executed", "failed", "reconciled")
_LEADS_TO = {
    "approve": ("approved", "edited"),
    "edit": ("edited",),
    "reject": ("rejected",),
    "respond": ("responded",),
}


@dataclass(frozen=True, slots=True)
class Step:
    event: str
    seq: int
    actor: str | None
    data: dict[str, Any]


@dataclass(slots=True)
class CallTrail:
    decisions: list[Step] = field(default_factory=list)
    execution: Step | None = None


@dataclass(slots=True)
class Trail:
    """One request's audit events, folded: created, terminal events, per-call decisions and
    the last execution step."""

    first_seq: int = 0
    last_seq: int = 0
    events: int = 0
    created: bool = False
    terminal: list[Step] = field(default_factory=list)
    calls: dict[str, CallTrail] = field(default_factory=dict)

    def feed(self, record: AuditRecord) -> None:
        self.events += 1
        self.first_seq = self.first_seq or record.seq
        self.last_seq = record.seq
        step = Step(record.event, record.seq, record.actor, record.data)
        if record.event == "created":
            self.created = True
        elif record.event in TERMINAL_EVENTS:
            self.terminal.append(step)
        elif record.tool_call_id is not None and record.event in DECISION_EVENTS:
            self.calls.setdefault(record.tool_call_id, CallTrail()).decisions.append(step)
        elif record.tool_call_id is not None and record.event in EXECUTION_EVENTS:
            self.calls.setdefault(record.tool_call_id, CallTrail()).execution = step


def disagreements(request: ApprovalRequest, trail: Trail) -> list[str]:
    """Where ``request`` (the stored row) and its audit trail disagree; empty when they match."""
    if trail.events == 0:
        return ["the audit log has no event for this request"]
    found = [] if trail.created else ["the audit log has no `created` event for it"]
    found += _status(request, trail)
    for call in request.calls:
        found += _call(call, trail, trail.calls.get(call.tool_call_id, CallTrail()))
    return found


def _status(request: ApprovalRequest, trail: Trail) -> list[str]:
    if len(trail.terminal) > 1:
        seqs = ", ".join(str(s.seq) for s in trail.terminal)
        return [f"the audit log ends it more than once (seq {seqs})"]
    end = trail.terminal[0] if trail.terminal else None
    if request.status == "pending":
        if end is not None:
            return [
                f"it is pending in the requests table, but the audit log says it was "
                f"{end.event} (seq {end.seq})"
            ]
        return []
    if end is None:
        return [
            f"it is {request.status} in the requests table, but the audit log has no "
            f"`{request.status}` event"
        ]
    if end.event != request.status:
        return [
            f"it is {request.status} in the requests table, but the audit log says it was "
            f"{end.event} (seq {end.seq})"
        ]
    return []


def _outcome(trail: Trail, call_id: str) -> tuple[Step, Any] | None:
    """The terminal event's recorded outcome for the call, if it lists one."""
    if len(trail.terminal) != 1:
        return None
    end = trail.terminal[0]
    outcomes = end.data.get("outcomes")
    if isinstance(outcomes, dict) and call_id in outcomes:
        return end, outcomes[call_id]
    return None


def _call(call: CallState, trail: Trail, calls: CallTrail) -> list[str]:
    name, resolution = f"call {call.tool_call_id}", call.resolution
    shown = resolution or "undecided"
    found: list[str] = []
    recorded = _outcome(trail, call.tool_call_id)
    if recorded is not None:
        end, outcome = recorded
        if outcome != resolution:
            found.append(
                f"{name} is {shown} in the requests table, but the audit log's "
                f"`{end.event}` event (seq {end.seq}) says {outcome or 'undecided'}"
            )
        elif resolution not in (None, "expired", "cancelled") and call.resolved_by != "timeout":
            found += _decided_by(call, calls)
    elif resolution == "cancelled":
        if not any(s.event == "cancelled" for s in trail.terminal):
            found.append(f"{name} is cancelled in the requests table, but nobody cancelled it")
    elif resolution == "expired":
        found.append(f"{name} is expired in the requests table, but the log has no expiry")
    elif resolution is not None:
        found += _decided_by(call, calls)
    found += _execution(call, calls)
    return found


def _decided_by(call: CallState, calls: CallTrail) -> list[str]:
    """A resolution a person gave needs a decision in the log that leads there, by them."""
    name, resolution = f"call {call.tool_call_id}", call.resolution
    leading = [
        s for s in calls.decisions if resolution in _LEADS_TO.get(str(_decision_type(s)), ())
    ]
    if not leading:
        return [
            f"{name} is {resolution} in the requests table, but no decision in the audit log "
            "leads there"
        ]
    actors = {s.actor for s in leading}
    if call.resolved_by is not None and call.resolved_by not in actors:
        by = ", ".join(sorted(a or "?" for a in actors))
        return [
            f"{name} was {resolution} by {call.resolved_by} in the requests table, but the "
            f"audit log's decisions leading there are by {by}"
        ]
    return []


def _decision_type(step: Step) -> object:
    return "edit" if step.event == "edit_rerouted" else step.data.get("type")


def _execution(call: CallState, calls: CallTrail) -> list[str]:
    name, step = f"call {call.tool_call_id}", calls.execution
    if step is None:
        if call.execution is None:
            return []
        return [
            f"{name} is {call.execution} in the requests table, but the audit log never "
            "recorded it starting"
        ]
    if step.event == "reconciled":
        outcome = step.data.get("outcome")
        expected = (outcome,) if outcome in ("executed", "failed") else ("executed", "failed")
    else:
        expected = (step.event,)
    if call.execution not in expected:
        return [
            f"{name} is {call.execution or 'not started'} in the requests table, but the "
            f"audit log says {step.event} (seq {step.seq})"
        ]
    return []
