"""The SQLite store's cached reads hand out shared read-only snapshots (as the MemoryStore).

The document cache keeps the parsed request next to its text: cached reads and woken
waiters get that one object, the writer's ``mutate`` a private copy, and whatever drops or
replaces the text drops or replaces the snapshot. ``tests/store/sqlite_snapshots.py`` (a
pytest plugin, on for these tests) checks no snapshot it handed out was changed in place.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from signoff.model import ApprovalRequest, RequestQuarantined, Transition
from signoff.store import SQLiteStore
from tests.store import sqlite_snapshots
from tests.store.factories import decide, decision
from tests.store.sqlite_snapshots import _sqlite_snapshots_untouched  # noqa: F401 (autouse)
from tests.store.test_quarantine import deep
from tests.store.test_sqlite_doc_cache import create, note, raw_doc


@pytest.fixture
async def watched(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    """A store whose cached reads are on: someone waits on another request."""
    async with SQLiteStore(tmp_path / "s.db") as store:
        await create(store, "watched")
        waiting = asyncio.ensure_future(store.wait("watched", timeout=60))
        while not store.stats()["cache_reads_trusted"]:
            await asyncio.sleep(0.001)  # the watcher's first look
        try:
            yield store
        finally:
            waiting.cancel()


async def test_a_cached_read_is_the_snapshot_the_writer_wrote(watched: SQLiteStore) -> None:
    await create(watched, "r1")
    transition = await watched.update_request("r1", note("a"))
    first = await watched.get_request("r1")
    assert first is transition.request
    assert await watched.get_request("r1") is first


async def test_the_first_parse_of_a_read_becomes_the_shared_snapshot(
    watched: SQLiteStore,
) -> None:
    await create(watched, "r1")
    await watched.update_request("r1", note("a"))
    entry = watched._cache.peek("r1")
    assert entry is not None
    watched._cache.put("r1", "pending", entry._replace(request=None), watched._cache.generation)
    first = await watched.get_request("r1")
    assert first is not None and first.waiter == "a"
    assert await watched.get_request("r1") is first


async def test_mutate_works_on_a_private_copy_of_the_snapshot(watched: SQLiteStore) -> None:
    await create(watched, "r1")
    await watched.update_request("r1", note("a"))
    snapshot = await watched.get_request("r1")
    assert snapshot is not None
    handed: list[ApprovalRequest] = []

    def mutate(req: ApprovalRequest) -> Transition:
        handed.append(req)
        # as the MemoryStore's (store/_working.py): its own lists and calls, sharing the
        # items the state machine only ever replaces whole
        assert req.action_requests is not snapshot.action_requests
        assert req.action_requests[0] is snapshot.action_requests[0]
        assert req.review_configs[0] is snapshot.review_configs[0]
        assert req.calls[0] is not snapshot.calls[0]
        assert req.calls[0].action is snapshot.calls[0].action
        req.waiter = "changed"
        req.calls[0].approvals.append("bob")  # calls are the working copy's own
        # action requests are shared with the snapshot: a change replaces one, as the state
        # machine does (model/resolution.py), never changes it in place
        shared = req.action_requests[0]
        req.action_requests[0] = shared.model_copy(update={"args": {**shared.args, "x": 1}})
        return Transition(req, [])

    await watched.update_request("r1", mutate)
    assert handed[0] is not snapshot
    assert snapshot.waiter == "a" and snapshot.calls[0].approvals == []
    assert "x" not in snapshot.action_requests[0].args
    after = await watched.get_request("r1")
    assert after is handed[0] and after.waiter == "changed"
    assert after.calls[0].approvals == ["bob"] and after.action_requests[0].args["x"] == 1


async def test_a_waiter_shares_the_committed_snapshot(watched: SQLiteStore) -> None:
    await create(watched, "r1")
    waiting = asyncio.ensure_future(watched.wait("r1", timeout=60))
    await asyncio.sleep(0)  # registered
    transition = await decide(watched, "r1", decision())
    assert await waiting is transition.request


async def test_a_hand_edit_replaces_the_snapshot_for_the_next_read(
    watched: SQLiteStore, tmp_path: Path
) -> None:
    path = tmp_path / "s.db"
    await create(watched, "r1")
    await watched.update_request("r1", note("cached"))
    old = await watched.get_request("r1")
    _, doc = raw_doc(path, "r1")
    doc["waiter"] = "edited"
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE requests SET doc = ? WHERE id = 'r1'", (json.dumps(doc),))
    conn.close()
    now = await watched.get_request("r1")
    assert now is not old and now is not None and now.waiter == "edited"
    assert old is not None and old.waiter == "cached"


async def test_a_second_store_writing_replaces_the_snapshot(
    watched: SQLiteStore, tmp_path: Path
) -> None:
    await create(watched, "r1")
    await watched.update_request("r1", note("first"))
    old = await watched.get_request("r1")
    async with SQLiteStore(tmp_path / "s.db") as second:
        await second.update_request("r1", note("second"))
    now = await watched.get_request("r1")
    assert now is not old and now is not None and now.waiter == "second"
    assert (await watched.update_request("r1", note("third"))).request.version == 3


async def test_a_document_that_may_not_read_back_is_not_shared_but_quarantined(
    watched: SQLiteStore,
) -> None:
    bad = await deep(watched)  # nested 250 deep: its text does not parse back
    entry = watched._cache.peek(bad.id)
    assert entry is not None and entry.request is None
    with pytest.raises(RequestQuarantined, match="recursion"):
        await watched.get_request(bad.id)
    with pytest.raises(RequestQuarantined):
        await watched.update_request(bad.id, note("x"))


def test_the_checker_sees_a_snapshot_changed_in_place() -> None:
    async def scenario(path: Path) -> None:
        async with SQLiteStore(path) as store:
            stored = await create(store, "r1")
            stored.waiter = "changed in place"  # the caller handed it over: not allowed

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(Path(tmp) / "s.db"))
    with pytest.raises(AssertionError, match="changed in place"):
        sqlite_snapshots.checked()
