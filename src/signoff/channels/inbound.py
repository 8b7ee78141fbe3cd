"""What every inbound channel does the same way once a callback is verified: find the
person behind a platform id, refuse replays, and decide — or say why not.

The gate's first-valid-decision-wins is the real barrier against double decisions; the
replay guard (provider event ids inside the freshness window) stops a captured callback
from being played again, even where the decision would be an idempotent repeat.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from signoff.channels.message import outcome
from signoff.model import AlreadyDecided, ApprovalRequest, NotFound, SignoffError, chains
from signoff.model.identity import person_key
from signoff.model.resolution import may_decide

if TYPE_CHECKING:
    from signoff.channels.host import GateHandle

Action = Literal["approve", "reject", "respond"]
FRESHNESS_S = 300.0


class ReplayGuard:
    """Remembers event ids for ``window_s`` (bounded); ``first_time`` is True once per id."""

    def __init__(self, window_s: float = 2 * FRESHNESS_S, max_entries: int = 100_000) -> None:
        self.window_s = window_s
        self.max_entries = max_entries
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def first_time(self, key: str, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        with self._lock:
            while self._seen:
                oldest, at = next(iter(self._seen.items()))
                if at > now - self.window_s and len(self._seen) < self.max_entries:
                    break
                del self._seen[oldest]
            if key in self._seen:
                return False
            self._seen[key] = now
            return True


def fresh(timestamp: str | float | None, now: float, window_s: float = FRESHNESS_S) -> bool:
    """Whether a signed timestamp (unix seconds) is within ``window_s`` of ``now``."""
    try:
        return abs(now - float(timestamp)) <= window_s  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def person_by(gate: GateHandle, field: str, platform_id: str | None) -> str | None:
    """The ``people:`` id whose address on this channel (``slack``, ``discord``, ``line``,
    ``telegram``, ``feishu``, ``dingtalk``, ``email``) is ``platform_id``."""
    if not platform_id:
        return None
    for pid, person in gate.policy.people.items():
        if getattr(person, field, None) == platform_id:
            return pid
    return None


def page_url(gate: GateHandle, request_id: str) -> str | None:
    """The request's page in the web inbox, when a public URL is known."""
    base = gate.delivery.base_url() if gate.delivery is not None else None
    return f"{base.rstrip('/')}/requests/{request_id}" if base else None


@dataclass(slots=True)
class Outcome:
    """The result of a decision attempt from a channel: ``ok`` with the new state, or the
    reason it was refused (shown to the person, privately)."""

    ok: bool
    text: str
    request: ApprovalRequest | None = None


def decidable(req: ApprovalRequest, person: str, roles: frozenset[str]) -> list[str]:
    """The calls ``person`` may decide now (pending, not yet approved by them)."""
    out = []
    for cfg, call in zip(req.review_configs, req.calls, strict=True):
        if call.resolution is not None or chains.done_with(cfg, call, person, person_key):
            continue
        if may_decide(cfg, req, person, roles) is None:
            out.append(call.tool_call_id)
    return out


async def may_act(gate: GateHandle, request_id: str, person: str) -> Outcome:
    """Check before opening a form (a reject reason): ok when ``person`` could decide now."""
    try:
        req = await gate.get(request_id)
    except NotFound:
        return Outcome(False, f"There is no request {request_id}.")
    if not req.pending:
        return Outcome(False, _already(req), req)
    if not decidable(req, person, gate.policy.roles_of(person)):
        return Outcome(False, f"You ({person}) may not decide this request.", req)
    return Outcome(True, "", req)


async def decide_as(
    gate: GateHandle,
    request_id: str,
    person: str,
    action: Action,
    *,
    channel: str,
    message: str | None = None,
) -> Outcome:
    """Record ``action`` on every call ``person`` may decide; refusals never change anything."""
    checked = await may_act(gate, request_id, person)
    if not checked.ok or checked.request is None:
        return checked
    req = checked.request
    targets = decidable(req, person, gate.policy.roles_of(person))
    decisions: list[dict[str, Any]] = [
        {"tool_call_id": c, "type": action, "message": message} for c in targets
    ]
    try:
        new = await gate.adecide(request_id, decisions, approver=person, channel=channel)
    except AlreadyDecided as exc:
        return Outcome(False, str(exc))
    except SignoffError as exc:
        return Outcome(False, str(exc))
    return Outcome(True, _done(new, person, action), new)


async def answer_by_choice(
    gate: GateHandle, request_id: str, person: str, index: object, *, channel: str
) -> Outcome:
    """Answer an inquiry with its ``index``-th choice (a button carries only the index)."""
    try:
        req = await gate.get(request_id)
        choices = (req.inquiry.choices or []) if req.inquiry is not None else []
        answer = choices[int(str(index))]
    except (ValueError, IndexError, SignoffError):
        return Outcome(False, "That answer is not available.")
    return await decide_as(gate, request_id, person, "respond", channel=channel, message=answer)


def _already(req: ApprovalRequest) -> str:
    return f"Already decided — {outcome(req)}."


def _done(req: ApprovalRequest, person: str, action: Action) -> str:
    if req.pending:
        verb = {"approve": "approval", "reject": "rejection", "respond": "answer"}[action]
        waiting = "; ".join(
            p
            for cfg, call in zip(req.review_configs, req.calls, strict=True)
            if call.resolution is None and (p := chains.progress(cfg, call))
        )
        more = f" ({waiting})" if waiting else ""
        return f"Your {verb} is recorded ({person}); waiting for more approvers{more}."
    return outcome(req)
