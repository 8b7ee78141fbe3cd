"""Audit events as the database's ``audit_append`` function takes them, and rows as read back.

The hash of a row is ``sha256(canonical_json(row without hash))`` (:mod:`signoff.store.audit`).
Two of its fields are only known under the chain's lock: ``prev_hash`` and ``seq``. Canonical
JSON sorts keys, and ``prev_hash`` sorts before ``seq``, so the text is always

    prefix + prev_hash + middle + str(seq) + suffix

This module cuts an event's canonical JSON there; the SQL function glues in the two values
and hashes. ``verify_audit`` re-hashes every row in Python with the shared code, so any
disagreement between the two sides shows up as a broken chain in the tests, not silently.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from signoff.model import AuditEvent, AuditRecord
from signoff.store.audit import canonical_json, iso_utc, json_native

_COLUMNS = (
    "request_id",
    "thread",
    "tool",
    "tool_call_id",
    "actor",
    "principal",
    "agent",
    "rule",
    "policy_hash",
)


def _field(key: str, value: Any) -> str:
    return canonical_json(key) + ":" + canonical_json(value)


def entry(event: AuditEvent) -> dict[str, Any]:
    """One element of ``audit_append``'s ``entries``: the cut canonical JSON plus columns."""
    at = iso_utc(event.at)
    data = json_native(event.data)
    body: dict[str, Any] = {name: getattr(event, name) for name in _COLUMNS}
    body.update(event=event.event, at=at, data=data)
    keys = sorted([*body, "prev_hash", "seq"])
    cut_prev, cut_seq = keys.index("prev_hash"), keys.index("seq")
    head = [_field(k, body[k]) for k in keys[:cut_prev]]
    middle = [_field(k, body[k]) for k in keys[cut_prev + 1 : cut_seq]]
    tail = [_field(k, body[k]) for k in keys[cut_seq + 1 :]]
    out = {name: body[name] for name in _COLUMNS}
    out.update(
        p="{" + "".join(f + "," for f in head) + '"prev_hash":"',
        m='"' + "".join("," + f for f in middle) + ',"seq":',
        s="".join("," + f for f in tail) + "}",
        event=event.event,
        at=at,
        data=data,
    )
    return out


def entries_json(events: Iterable[AuditEvent]) -> str:
    return json.dumps([entry(e) for e in events], ensure_ascii=True, separators=(",", ":"))


def to_record(row: tuple[Any, ...]) -> AuditRecord:
    (seq, event, at, request_id, thread, tool, call_id, actor, principal, agent, rule, policy,
     data, prev_hash, digest) = row  # fmt: skip
    return AuditRecord(
        seq=int(seq),
        event=event,
        at=_utc(at),
        request_id=request_id,
        thread=thread,
        tool=tool,
        tool_call_id=call_id,
        actor=actor,
        principal=principal,
        agent=agent,
        rule=rule,
        policy_hash=policy,
        data=json.loads(data),
        prev_hash=prev_hash,
        hash=digest,
    )


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)
