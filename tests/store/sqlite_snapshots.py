"""pytest plugin: fail a test that changes a request snapshot the SQLite store handed out.

The SQLite store's document cache keeps, next to each document's JSON text, the parsed
request, and cached reads, waiters and the caller of a change share that snapshot
read-only (as the MemoryStore's, ``tests/gate/snapshots.py``). This plugin records every
snapshot the cache takes in, with its text, and checks at every change that takes it out
and at the end of each test that each one still equals what its text parses to.

Run a suite with it: ``pytest -p tests.store.sqlite_snapshots tests/gate tests/server …``;
a test module turns it on for its own tests by importing ``_sqlite_snapshots_untouched``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from signoff.model import ApprovalRequest
from signoff.store import _sqlite_cache
from signoff.store._quarantine import parse_doc

_put, _remember, _take = (
    _sqlite_cache.DocCache.put,
    _sqlite_cache.DocCache.remember,
    _sqlite_cache.DocCache.take,
)
_seen: list[tuple[str, ApprovalRequest, str]] = []
_lock = threading.Lock()
_recording = False  # only inside a test that uses the fixture below (nothing kept elsewhere)


def _record(request_id: str, entry: _sqlite_cache.Cached) -> None:
    if _recording and entry.request is not None:
        with _lock:
            _seen.append((request_id, entry.request, entry.doc))


def _check(request_id: str, snapshot: ApprovalRequest, doc: str) -> None:
    written = parse_doc(request_id, doc)
    assert isinstance(written, ApprovalRequest), written
    assert snapshot.model_dump(mode="json") == written.model_dump(mode="json"), (
        f"request {request_id}: a snapshot the SQLite store handed out was changed in place"
    )


def put(self: Any, request_id: str, status: str, entry: Any, generation: int) -> None:
    _record(request_id, entry)
    _put(self, request_id, status, entry, generation)


def remember(self: Any, request_id: str, entry: Any, request: ApprovalRequest) -> None:
    _record(request_id, entry._replace(request=request))
    _remember(self, request_id, entry, request)


def take(self: Any, request_id: str) -> Any:
    entry = _take(self, request_id)
    if entry is not None and entry.request is not None:
        _check(request_id, entry.request, entry.doc)
    return entry


_sqlite_cache.DocCache.put = put  # type: ignore[method-assign]
_sqlite_cache.DocCache.remember = remember  # type: ignore[method-assign]
_sqlite_cache.DocCache.take = take  # type: ignore[method-assign]


def checked() -> int:
    """Check every snapshot recorded so far and forget them; returns how many there were."""
    with _lock:
        seen = list(_seen)
        _seen.clear()
    for request_id, snapshot, doc in seen:
        _check(request_id, snapshot, doc)
    return len(seen)


@pytest.fixture(autouse=True)
def _sqlite_snapshots_untouched() -> Iterator[None]:
    global _recording
    with _lock:  # (an earlier test's leftovers are not this test's)
        _seen.clear()
    _recording = True
    try:
        yield
    finally:
        _recording = False
    checked()
