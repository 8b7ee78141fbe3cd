"""A changed request made ready for its write on the SQLite writer: one conditional
``UPDATE``'s parameters, the document's JSON text, and its audit rows' chain-independent
text (:mod:`._sqlite_seal`), so that after it only the chain link and the statement remain.

Where this runs, measured (issue #15 round 4, ``docs/benchmarks.md``): computing the change
on the caller's event loop against the document cache ("optimistic writes", as the
PostgreSQL store does with :mod:`._written`) halved the writer's time per write, but with
8 agents the one event loop is the busier thread, and the process's CPU per cycle and the
cycles per second were worse than with the change made on the writer. So ``mutate``, the
dump and this preparation run on the writer, inside the transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from signoff.model import StoreError, Transition
from signoff.store._sqlite_rows import epoch
from signoff.store._sqlite_seal import Unsealed, unsealed_all


class Change(NamedTuple):
    """A changed transition ready to write: the document's JSON text and the parameters of
    the conditional ``UPDATE`` (``_sqlite_rows.UPDATE_DOC``'s)."""

    transition: Transition
    doc: str
    params: tuple[Any, ...]
    audit: list[Unsealed]  # the transition's events, ready to chain (see _sqlite_seal)


def prepare_change(request_id: str, transition: Transition, old_version: int) -> Change:
    """The write of ``transition`` (a changed one) over the row at ``old_version``."""
    new = transition.request
    if new.id != request_id:
        raise StoreError(f"a mutation turned request {request_id} into {new.id}")
    if new.version <= old_version:
        new.version = old_version + 1
    doc = new.model_dump_json()
    params = (new.status, epoch(new.sweep_at), new.version, doc, request_id, old_version)
    return _new_change(Change, (transition, doc, params, unsealed_all(transition.events)))


# Change(...) without the named tuple's Python-level __new__ (once per update, on the writer)
_new_change: Callable[[type[Change], tuple[Any, ...]], Change] = tuple.__new__
