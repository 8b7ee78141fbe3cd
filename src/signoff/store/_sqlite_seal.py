"""Audit rows sealed in two steps: the text of an event before the chain, then its link.

Why: the SQLite writer thread chains every audit row (``seq``, ``prev_hash``, ``hash``) in
commit order, and whatever Python it runs holds the GIL against every event loop. Most of a
row's sealing does not depend on the chain — its timestamp text, its data's canonical text,
the canonical JSON of its other fields — so the caller prepares that on its own loop
(:func:`unsealed`) and the writer only splices ``prev_hash`` and ``seq`` in and hashes
(:func:`chain`).

The hashed text is exactly :func:`signoff.store.audit.seal_row`'s (the canonical JSON of the
row without ``hash``; keys sorted: ``actor``, ``agent``, ``at``, ``data``, ``event``,
``policy_hash``, ``prev_hash``, ``principal``, ``request_id``, ``rule``, ``seq``, ``thread``,
``tool``, ``tool_call_id``); ``tests/store/test_sqlite_seal.py`` holds the two together.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any, NamedTuple

from signoff.model import AuditEvent
from signoff.store.audit import _canonical_data, canonical_json, iso_utc


class Unsealed(NamedTuple):
    """An event's hashed text around the two chain fields, and its stored columns."""

    front: str  # up to the value of "prev_hash"
    middle: str  # between the value of "prev_hash" and the value of "seq"
    back: str  # after the value of "seq"
    columns: tuple[Any, ...]  # event … policy_hash, as stored
    data: str


def _fields(values: dict[str, Any]) -> str:
    """``"k":v,...`` of a canonical object, without its braces."""
    return canonical_json(values)[1:-1]


def unsealed(event: AuditEvent) -> Unsealed:
    """Everything of ``event``'s sealed row that does not depend on its place in the chain."""
    at = iso_utc(event.at)
    data = _canonical_data(event.data)
    head = _fields({"actor": event.actor, "agent": event.agent, "at": at})
    kind = _fields({"event": event.event, "policy_hash": event.policy_hash})
    who = _fields(
        {"principal": event.principal, "request_id": event.request_id, "rule": event.rule}
    )
    where = _fields(
        {"thread": event.thread, "tool": event.tool, "tool_call_id": event.tool_call_id}
    )
    columns = (
        event.event,
        at,
        event.request_id,
        event.thread,
        event.tool,
        event.tool_call_id,
        event.actor,
        event.principal,
        event.agent,
        event.rule,
        event.policy_hash,
    )
    return Unsealed(
        f'{{{head},"data":{data},{kind},"prev_hash":', f",{who},", f",{where}}}", columns, data
    )


def unsealed_all(events: Iterable[AuditEvent]) -> list[Unsealed]:
    return [unsealed(event) for event in events]


def chain(
    items: Iterable[Unsealed], last_seq: int, last_hash: str, origin: str
) -> list[tuple[Any, ...]]:
    """The rows of ``items`` chained after ``(last_seq, last_hash)``, as the audit table's
    columns (``seq`` … ``hash``, ``origin``)."""
    rows = []
    for item in items:
        last_seq += 1
        body = f'{item.front}"{last_hash}"{item.middle}"seq":{last_seq}{item.back}'
        digest = hashlib.sha256(body.encode("ascii")).hexdigest()
        rows.append((last_seq, *item.columns, item.data, last_hash, digest, origin))
        last_hash = digest
    return rows
