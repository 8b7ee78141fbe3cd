"""Optimistic writes for the SQLite store: a change computed on the caller's loop.

Why: the store has one writer thread, and whatever Python runs there holds the GIL against
every event loop while every other write of every process waits for its transaction. An
update used to parse nothing (the document cache), but still ran the gate's ``mutate``,
dumped the new document to JSON and built its statement's parameters on the writer. Now the
caller does that against its snapshot of the cache (:func:`prepare_snapshot`) before the job is
queued — and the chain-independent text of its audit rows (:mod:`._sqlite_seal`) — and the
writer only chains the audit rows and runs the one conditional ``UPDATE``.

Why that is exact: the writer uses a prepared change only if the cache entry it *takes*
inside ``BEGIN IMMEDIATE`` is the very entry the caller parsed (the same object). An entry
is in the cache only while it is the row as this store last wrote it: the writer drops the
whole cache when ``PRAGMA data_version`` shows another connection's commit, a job takes the
entry out while it changes the row and only its after-commit callback puts the new one back
(a rolled-back savepoint or group leaves none). So a second change of the same request
queued in the same group, or after another one, finds no entry or a newer one, and is made
again on the writer from the row as it is then (a claim raced by two agents: one wins, the
other is refused there). The ``UPDATE`` is still conditional on the version.

A mutation that raises or changes nothing on the snapshot is not trusted either: it runs
again on the writer against the row (as the PostgreSQL store's remembered documents do).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from signoff.model import ApprovalRequest, StoreError, Transition
from signoff.store._quarantine import parse_doc
from signoff.store._sqlite_cache import Cached
from signoff.store._sqlite_rows import epoch
from signoff.store._sqlite_seal import Unsealed, unsealed_all
from signoff.store.base import Mutation


@dataclass(frozen=True, slots=True)
class Change:
    """A changed transition ready to write: the document's JSON text and the parameters of
    the conditional ``UPDATE`` (see :func:`~._sqlite_rows.update_prepared`)."""

    transition: Transition
    doc: str
    params: tuple[Any, ...]
    audit: list[Unsealed]  # the transition's events, ready to chain (see _sqlite_seal)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A change computed from the cache entry ``seen``."""

    seen: Cached
    change: Change


def prepare_change(request_id: str, transition: Transition, old_version: int) -> Change:
    """The write of ``transition`` (a changed one) over the row at ``old_version``."""
    new = transition.request
    if new.id != request_id:
        raise StoreError(f"a mutation turned request {request_id} into {new.id}")
    if new.version <= old_version:
        new.version = old_version + 1
    doc = new.model_dump_json()
    params = (new.status, epoch(new.sweep_at), new.version, doc, new.id, old_version)
    return Change(transition, doc, params, unsealed_all(transition.events))


def prepare_snapshot(request_id: str, seen: Cached, mutate: Mutation) -> Prepared | None:
    """On the caller's loop: ``mutate`` a parse of ``seen`` and prepare its write; None when
    the writer must do it (the text does not parse, the mutation raised, refused or changed
    nothing — the row may have moved on since the snapshot)."""
    current = parse_doc(request_id, seen.doc)
    if not isinstance(current, ApprovalRequest):
        return None
    try:
        transition = mutate(current)
        if not transition.changed:
            return None
        return Prepared(seen, prepare_change(request_id, transition, seen.version))
    except Exception:  # made again on the row, which raises if it must
        return None
