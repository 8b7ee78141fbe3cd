"""Audit events as the database's ``audit_append`` function takes them, and rows as read back.

The hash of a row is ``sha256(canonical_json(row without hash))`` (:mod:`signoff.store.audit`).
Two of its fields are only known under the chain's lock: ``prev_hash`` and ``seq``. Canonical
JSON sorts keys, and ``prev_hash`` sorts before ``seq``, so the text is always

    prefix + prev_hash + middle + str(seq) + suffix

This module cuts an event's canonical JSON there — the chain-independent text that
:func:`signoff.store.audit.unsealed` builds for every store — and the SQL function glues in
the two values and hashes. ``verify_audit`` re-hashes every row in Python with the shared
code, so any disagreement between the two sides shows up as a broken chain in the tests, not
silently.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from signoff.model import AuditEvent, AuditRecord
from signoff.store.audit import Unsealed, canonical_json, unsealed

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

# json's own C string encoder, which the canonical encoder uses for every str
_ascii_string: Callable[[str], str] = json.encoder.encode_basestring_ascii


def _cut(item: Unsealed) -> tuple[str, str, str]:
    """(p, m, s): the hashed text is ``p + prev_hash + m + str(seq) + s``, where
    :class:`~signoff.store.audit.Unsealed` quotes ``prev_hash`` itself."""
    return item.front + '"', '"' + item.middle, item.back


def entry(event: AuditEvent) -> dict[str, Any]:
    """One element of ``audit_append``'s ``entries``: the cut canonical JSON plus columns."""
    item = unsealed(event)
    p, m, s = _cut(item)
    out = dict(zip(("event", "at", *_COLUMNS), item.columns, strict=True))
    out.update(p=p, m=m, s=s, data=json.loads(item.data))
    return out


def _entry_json(event: AuditEvent) -> str:
    """:func:`entry` as JSON text, built from the strings :func:`unsealed` made (no dict,
    no second encoding of ``data``: its canonical text goes in as it is)."""
    item = unsealed(event)
    p, m, s = _cut(item)
    fields = ",".join(
        f'"{name}":{_text(value)}'
        for name, value in zip(("event", "at", *_COLUMNS), item.columns, strict=True)
    )
    return (
        f'{{"p":{_ascii_string(p)},"m":{_ascii_string(m)},"s":{_ascii_string(s)},'
        f'{fields},"data":{item.data}}}'
    )


def _text(value: Any) -> str:
    if type(value) is str:
        return _ascii_string(value)
    return "null" if value is None else canonical_json(value)


def entries_json(events: Iterable[AuditEvent]) -> str:
    return "[" + ",".join(_entry_json(e) for e in events) + "]"


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
