"""The working copy a store's change is made on: a request of its own, sharing with the
snapshot it replaces what the state machine never changes in place.

Review configs, action requests and decisions are set when created and replaced whole (an
edit that reroutes a call puts a new config and action request in their place; sealing a
finished call's secrets replaces its action request and decisions), and the principal is
never changed: the working copy shares them with the snapshot it replaces (the lists are its
own). Calls (``CallState``) are the working copy's own, changed in place, but share their
``action``: an edit or sealing a finished call's secrets puts a new ``Action`` in its place.
The state machine keeps to this (``model/resolution.py``'s docstring); the snapshot checkers
(``tests/gate/snapshots.py`` for the MemoryStore, ``tests/store/sqlite_snapshots.py`` for the
SQLite store's document cache) fail a test whose change alters the snapshot it replaced.

Measured (issue #15 round 6, ``docs/benchmarks.md``): about a third of what a full
``copy_for_update()`` costs for the benchmark's one-call request.
"""

from __future__ import annotations

from signoff.model import ApprovalRequest
from signoff.model._clone import clone

_SHARED_IN_WORKING_COPY = frozenset(
    {"review_configs", "action_requests", "decisions", "principal", "calls"}
)
_SHARED_IN_CALL = frozenset({"action"})


def working_copy(snapshot: ApprovalRequest) -> ApprovalRequest:
    """The copy a change works on: its own calls, lists and dicts; the items above shared."""
    copy = clone(snapshot, _SHARED_IN_WORKING_COPY)
    copy.__dict__["calls"] = [clone(call, _SHARED_IN_CALL) for call in snapshot.calls]
    return copy
