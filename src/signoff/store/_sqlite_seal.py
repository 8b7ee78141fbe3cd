"""Audit rows sealed in two steps on SQLite: the text of an event before the chain, then its link.

Why: the SQLite writer thread chains every audit row (``seq``, ``prev_hash``, ``hash``) in
commit order, and whatever Python it runs holds the GIL against every event loop. Most of a
row's sealing does not depend on the chain — its timestamp text, its data's canonical text,
its other fields as JSON — so that is built first (:func:`signoff.store.audit.unsealed`, the
one builder of the hashed text, which :func:`~signoff.store.audit.seal_row` uses too) and the
chain step only splices ``prev_hash`` and ``seq`` in and hashes (:func:`chain`). A job may do
the first step before it takes the chain's head. ``tests/store/test_sqlite_seal.py`` holds
the rows to exactly ``seal_row``'s.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from signoff.model import AuditEvent
from signoff.store.audit import Unsealed, json_string, unsealed

__all__ = ["Unsealed", "chain", "unsealed_all"]


def unsealed_all(events: Iterable[AuditEvent]) -> list[Unsealed]:
    return [unsealed(event) for event in events]


def chain(
    items: Iterable[Unsealed], last_seq: int, last_hash: str, origin: str
) -> list[tuple[Any, ...]]:
    """The rows of ``items`` chained after ``(last_seq, last_hash)``, as the audit table's
    columns (``seq`` … ``hash``, ``origin``)."""
    rows = []
    sha256 = hashlib.sha256
    for front, middle, back, columns, data in items:
        last_seq += 1
        # Unsealed.hashed with its two texts inline (an int's is str(), a str's json_string)
        text = f"{front}{json_string(last_hash)}{middle}{last_seq}{back}"
        digest = sha256(text.encode("ascii")).hexdigest()
        rows.append((last_seq, *columns, data, last_hash, digest, origin))
        last_hash = digest
    return rows
