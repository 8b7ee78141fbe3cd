"""What a request needs sent: the notification outbox rows, planned from the policy.

Pure planning, no I/O: the gate writes a new request's rows in the request's own
transaction (prompts to its approvers, reminders before the deadline, ``created`` events);
an escalation adds prompts for the next group; a resolution turns every sent prompt into an
update and tells event subscribers. :mod:`signoff.channels.delivery` sends the rows.

Row ids are derived from (request, kind, channel, recipient), so planning twice — a
decision racing a send, a restart replaying an escalation — stores each message once, and
the id doubles as the provider's idempotency key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from signoff.channels import Messenger, Target, notify_names
from signoff.model import ApprovalRequest, chains, same_person
from signoff.model.identity import contains_person
from signoff.store.base import PROMPT_KINDS, OutboxItem, OutboxKind

if TYPE_CHECKING:
    from signoff.policy.people import Person

TERMINAL_EVENTS = {"resolved": "decided", "expired": "expired", "cancelled": "cancelled"}


def item_id(request_id: str, kind: str, channel: str, recipient: str, extra: str = "") -> str:
    """25 characters (Discord's nonce limit), the same every time for the same message."""
    digest = hashlib.sha256(f"{request_id}|{kind}|{channel}|{recipient}|{extra}".encode())
    return "ob_" + digest.hexdigest()[:22]


def approvers_of(
    req: ApprovalRequest, people: Mapping[str, Person], *, escalation: bool = False
) -> list[Person]:
    """The people to notify: those who may approve some call now — for an approval chain,
    the stage now asked, never a later one (after escalation: only those the escalation
    adds). The requester is left out when they may not approve their own call — unless
    nobody else is left to hear about it."""
    chosen: list[Person] = []
    undecided = [
        (
            chains.asked_now(cfg, call).to_approvers(),
            chains.stage_config(cfg, call).escalate_to,
            # in a chain with distinct: true, whoever already counted cannot count again
            call.approvals if cfg.approvers.chained and cfg.approvers.distinct else [],
        )
        for cfg, call in zip(req.review_configs, req.calls, strict=True)
        if call.resolution is None
    ]
    for pid, person in people.items():
        first = any(
            group.admits(pid, person.roles) and not contains_person(done, pid)
            for group, _, done in undecided
        )
        later = any(
            extra is not None
            and extra.to_approvers().admits(pid, person.roles)
            and not contains_person(done, pid)
            for _, extra, done in undecided
        )
        if (later and not first) if escalation else first:
            chosen.append(person)
    if all(cfg.forbid_self_approval for cfg in req.review_configs):
        others = [p for p in chosen if not same_person(p.id, req.principal.id)]
        if others:
            return others
    return chosen


class Planner:
    """Outbox rows for one gate's messengers, its ``people:`` and its reminder settings."""

    def __init__(
        self,
        messengers: Mapping[str, Messenger],
        people: Mapping[str, Person],
        remind_before_s: Sequence[float] = (),
    ) -> None:
        self.messengers = messengers
        self.people = people
        self.remind_before_s = tuple(remind_before_s)

    def created(self, req: ApprovalRequest, now: datetime) -> list[OutboxItem]:
        """Rows for a new request: prompts, reminders and ``created`` events."""
        people = approvers_of(req, self.people)
        items = self._prompts(req, people, "prompt", now)
        items += self._reminders(req, people, now)
        items += self._events(req, "created", now)
        return items

    def escalated(self, req: ApprovalRequest, now: datetime) -> list[OutboxItem]:
        """Prompts for the people the escalation adds, reminders for the new deadline."""
        added = approvers_of(req, self.people, escalation=True)
        items = self._prompts(req, added, "escalation", now, f"{req.expires_at.timestamp():.0f}")
        items += self._reminders(req, approvers_of(req, self.people) + added, now)
        items += self._events(req, "escalated", now)
        return items

    def stage_started(self, req: ApprovalRequest, now: datetime) -> list[OutboxItem]:
        """Prompts for the people of the stage an approval chain just moved to (keyed by the
        request's version: each stage start asks once), reminders for its deadline."""
        people = approvers_of(req, self.people)
        items = self._prompts(req, people, "prompt", now, f"stage-{req.version}")
        items += self._reminders(req, people, now)
        items += self._events(req, "stage_started", now, key=f"stage_started-{req.version}")
        return items

    def rerouted(self, req: ApprovalRequest, now: datetime) -> list[OutboxItem]:
        """Prompts for whoever may decide the request now that an edit moved a call to
        another rule (keyed by the request's version: each re-route asks once)."""
        people = approvers_of(req, self.people)
        items = self._prompts(req, people, "prompt", now, f"rerouted-{req.version}")
        items += self._events(req, "edit_rerouted", now)
        return items

    def resolved(
        self, req: ApprovalRequest, rows: Sequence[OutboxItem], now: datetime
    ) -> list[OutboxItem]:
        """An update for every prompt already sent, and the outcome event."""
        items = [u for u in (self.update_for(row, now) for row in rows) if u is not None]
        return items + self._events(req, TERMINAL_EVENTS[req.status], now)

    def update_for(self, row: OutboxItem, now: datetime) -> OutboxItem | None:
        """The update of one sent prompt (None if its channel cannot or need not update)."""
        m = self.messengers.get(row.channel)
        if (
            m is None
            or "update" not in m.kinds
            or row.kind not in PROMPT_KINDS
            or row.status != "sent"
            or row.ref is None
        ):
            return None
        return OutboxItem(
            id=item_id(row.request_id, "update", row.channel, row.recipient, row.id),
            request_id=row.request_id,
            channel=row.channel,
            kind="update",
            recipient=row.recipient,
            person=row.person,
            next_at=now,
            data={"of": row.id, "ref": row.ref, "of_kind": row.kind},
        )

    def _reminders(
        self, req: ApprovalRequest, people: Sequence[Person], now: datetime
    ) -> list[OutboxItem]:
        """One reminder per ``remind_before`` that still falls before the deadline (keyed by
        the deadline, so an escalation's new deadline gets reminders of its own)."""
        items: list[OutboxItem] = []
        for before in self.remind_before_s:
            at = req.expires_at - timedelta(seconds=before)
            if at > now:
                extra = f"{req.expires_at.timestamp():.0f}-{before:g}"
                items += self._prompts(req, people, "reminder", at, extra, {"before_s": before})
        return items

    def _prompts(
        self,
        req: ApprovalRequest,
        people: Sequence[Person],
        kind: OutboxKind,
        at: datetime,
        extra: str = "",
        data: dict[str, Any] | None = None,
    ) -> list[OutboxItem]:
        names = notify_names(req)
        items = []
        for m in self.messengers.values():
            if kind not in m.kinds or (names is not None and m.name not in names):
                continue
            for target in m.targets(people, kind):
                items.append(_row(req, m.name, kind, target, at, extra, data or {}))
        return items

    def told(self, req: ApprovalRequest, event: str, now: datetime) -> list[OutboxItem]:
        """Event rows for a change that prompts nobody but subscribers may follow (an approval
        that also granted, a re-attached or a reconciled request); keyed by the request's
        version, so each change is told once."""
        return self._events(req, event, now, key=f"{event}-{req.version}")

    def _events(
        self, req: ApprovalRequest, event: str, at: datetime, key: str | None = None
    ) -> list[OutboxItem]:
        names = notify_names(req)
        items = []
        for m in self.messengers.values():
            if "event" not in m.kinds or (names is not None and m.name not in names):
                continue
            for target in m.targets([], "event", event):
                items.append(_row(req, m.name, "event", target, at, key or event, {"event": event}))
        return items


def _row(
    req: ApprovalRequest,
    channel: str,
    kind: OutboxKind,
    target: Target,
    at: datetime,
    extra: str,
    data: dict[str, Any],
) -> OutboxItem:
    body = dict(data)
    if target.mentions:
        body["mentions"] = list(target.mentions)
    return OutboxItem(
        id=item_id(req.id, kind, channel, target.address, extra),
        request_id=req.id,
        channel=channel,
        kind=kind,
        recipient=target.address,
        person=target.person,
        next_at=at,
        data=body,
    )
