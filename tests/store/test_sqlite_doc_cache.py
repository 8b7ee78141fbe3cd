"""The SQLite store's write-through document cache (``store/_sqlite_cache.py``).

What must hold: a change made by anyone else — a second store on the same file (what a
second process is to SQLite), a hand edit in a raw connection that rings nobody — is seen by
the next ``update_request``; a job that rolls back leaves no cached document; reads on the
event loop use the cache only while the watcher and its doorbell make it current.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from signoff.model import ApprovalRequest, AuditEvent, StoreError, Transition
from signoff.store import SQLiteStore
from signoff.store.base import Mutation
from tests.store.factories import created_events, decide, decision, make_grant, make_request
from tests.store.test_sqlite_group_commit import HeldWriter


def note(who: str) -> Mutation:
    """A mutation that records ``who`` as the request's waiter (and audits it)."""

    def mutate(req: ApprovalRequest) -> Transition:
        req.waiter = who
        event = AuditEvent(event="reattached", request_id=req.id, thread=req.thread, actor=who)
        return Transition(req, [event])

    return mutate


async def create(store: SQLiteStore, request_id: str) -> ApprovalRequest:
    request = make_request(request_id=request_id, thread=request_id)
    stored, created = await store.create_request(request, created_events(request))
    assert created
    return stored


def raw_doc(path: Path, request_id: str) -> tuple[int, dict[str, object]]:
    conn = sqlite3.connect(path)
    try:
        version, doc = conn.execute(
            "SELECT version, doc FROM requests WHERE id = ?", (request_id,)
        ).fetchone()
    finally:
        conn.close()
    return int(version), json.loads(doc)


async def test_an_update_uses_the_cached_document_without_reading_the_row(
    tmp_path: Path,
) -> None:
    seen: list[str] = []
    async with SQLiteStore(tmp_path / "s.db") as store:
        await create(store, "r1")
        await store._write(lambda conn: conn.set_trace_callback(seen.append))
        await store.update_request("r1", note("a"))
        await store.update_request("r1", note("b"))
        assert not [s for s in seen if s.startswith("SELECT") and "FROM requests" in s]
        assert store.stats()["cache_hits"] == 2
        version, doc = raw_doc(tmp_path / "s.db", "r1")
        assert doc["waiter"] == "b" and version == doc["version"] == 2


async def test_a_second_store_writing_between_cached_updates_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SQLiteStore(path) as first, SQLiteStore(path) as second:
        await create(first, "r1")
        await first.update_request("r1", note("first"))
        await second.update_request("r1", note("second"))
        seen: list[str | None] = []

        def look(req: ApprovalRequest) -> Transition:
            seen.append(req.waiter)
            return note("first-again")(req)

        tr = await first.update_request("r1", look)
        assert seen == ["second"]  # the row the second store wrote, not the cached one
        assert tr.request.version == 3
        assert (await first.verify_audit()).ok


async def test_another_process_writing_between_cached_updates_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SQLiteStore(path) as store:
        await create(store, "r1")
        await store.update_request("r1", note("here"))
        child = (
            "import asyncio, sys\n"
            "from signoff.store import SQLiteStore\n"
            "from tests.store.test_sqlite_doc_cache import note\n"
            "async def main():\n"
            "    async with SQLiteStore(sys.argv[1]) as s:\n"
            "        await s.update_request('r1', note('child'))\n"
            "asyncio.run(main())\n"
        )
        from tests.store.factories import subprocess_env

        subprocess.run(
            [sys.executable, "-c", child, str(path)],
            check=True,
            env=subprocess_env(),
            cwd=Path(__file__).parents[2],
            timeout=60,
        )
        tr = await store.update_request("r1", note("here-again"))
        assert tr.request.version == 3
        events = [(r.event, r.actor) for r in await store.read_audit()]
        assert events[-3:] == [
            ("reattached", "here"),
            ("reattached", "child"),
            ("reattached", "here-again"),
        ]


async def test_a_hand_edit_that_keeps_the_version_is_seen_by_the_next_update(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    async with SQLiteStore(path) as store:
        await create(store, "r1")
        await store.update_request("r1", note("cached"))
        _, doc = raw_doc(path, "r1")
        doc["waiter"] = "edited by hand"
        conn = sqlite3.connect(path)
        with conn:  # no version bump, no doorbell: only data_version can tell
            conn.execute("UPDATE requests SET doc = ? WHERE id = 'r1'", (json.dumps(doc),))
        conn.close()
        seen: list[str | None] = []

        def look(req: ApprovalRequest) -> Transition:
            seen.append(req.waiter)
            return note("after")(req)

        await store.update_request("r1", look)
        assert seen == ["edited by hand"]


async def test_a_job_that_raises_after_changing_the_document_leaves_no_cached_copy(
    tmp_path: Path,
) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        await create(store, "r1")
        await store.update_request("r1", note("kept"))

        def half_done(req: ApprovalRequest) -> Transition:
            req.waiter = "never stored"
            raise RuntimeError("the mutation failed")

        with pytest.raises(RuntimeError):
            await store.update_request("r1", half_done)
        assert (await store.get_request("r1")).waiter == "kept"  # type: ignore[union-attr]
        seen: list[str | None] = []

        def look(req: ApprovalRequest) -> Transition:
            seen.append(req.waiter)
            return Transition(req, [], changed=False)

        await store.update_request("r1", look)
        assert seen == ["kept"]


async def test_a_rolled_back_savepoint_leaves_no_cached_copy(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        await create(store, "r1")
        await create(store, "r2")
        grant = make_grant(grant_id="g-dup", thread="r1")
        await store.create_grant(grant, [])

        def with_duplicate_grant(req: ApprovalRequest) -> Transition:
            req.waiter = "rolled back"
            return Transition(req, [], grants=[grant])  # a stored id: the write is refused

        async with HeldWriter(store) as held:
            tasks = await held.queue(
                store.update_request("r1", with_duplicate_grant),
                store.update_request("r2", note("committed")),
            )
        with pytest.raises(StoreError):
            await tasks[0]
        await tasks[1]
        assert (await store.get_request("r1")).waiter is None  # type: ignore[union-attr]
        assert (await store.get_request("r2")).waiter == "committed"  # type: ignore[union-attr]
        assert raw_doc(tmp_path / "s.db", "r1")[1]["waiter"] is None
        assert (await store.verify_audit()).ok


async def test_two_changes_to_one_request_in_one_group_both_land(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        await create(store, "r1")
        await store.update_request("r1", note("zero"))
        async with HeldWriter(store) as held:
            tasks = await held.queue(
                store.update_request("r1", note("one")),
                store.update_request("r1", note("two")),
            )
        versions = [(await t).request.version for t in tasks]
        assert versions == [2, 3]
        assert (await store.get_request("r1")).waiter == "two"  # type: ignore[union-attr]
        assert raw_doc(tmp_path / "s.db", "r1")[0] == 3


async def test_reads_skip_the_cache_while_nothing_watches_for_other_writers(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    async with SQLiteStore(path) as store:
        await create(store, "r1")
        await store.update_request("r1", note("cached"))
        assert not store.stats()["cache_reads_trusted"]
        _, doc = raw_doc(path, "r1")
        doc["waiter"] = "edited"
        conn = sqlite3.connect(path)
        with conn:
            conn.execute("UPDATE requests SET doc = ? WHERE id = 'r1'", (json.dumps(doc),))
        conn.close()
        assert (await store.get_request("r1")).waiter == "edited"  # type: ignore[union-attr]


async def test_a_ringing_writer_drops_cached_reads_before_waiters_wake(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SQLiteStore(path) as first, SQLiteStore(path) as second:
        await create(first, "r1")
        await create(first, "watched")
        await first.update_request("r1", note("first"))
        waiting = asyncio.ensure_future(first.wait("watched", timeout=30))
        while not first.stats()["cache_reads_trusted"]:
            await asyncio.sleep(0.001)  # the watcher's first look
        await first.update_request("r1", note("cached again"))
        assert first._cached("r1") is not None  # served on the loop from here on
        await second.update_request("r1", note("second"))
        await decide(second, "watched", decision())
        assert (await waiting).terminal  # woken by the watcher, after it dropped the cache
        assert (await first.get_request("r1")).waiter == "second"  # type: ignore[union-attr]


async def test_reads_stop_trusting_the_cache_when_the_watcher_stops(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "s.db", wake_interval_s=0.01) as store:
        await create(store, "watched")
        waiting = asyncio.ensure_future(store.wait("watched", timeout=30))
        while not store.stats()["cache_reads_trusted"]:
            await asyncio.sleep(0.001)
        await decide(store, "watched", decision())
        await waiting
        store._watcher.stop()
        assert not store.stats()["cache_reads_trusted"]


async def test_a_hand_edit_is_seen_by_the_next_read_while_reads_use_the_cache(
    tmp_path: Path,
) -> None:
    """A writer that rings nobody (the sqlite3 shell): the probe's data_version tells."""
    path = tmp_path / "s.db"
    async with SQLiteStore(path) as store:
        await create(store, "r1")
        await create(store, "watched")
        waiting = asyncio.ensure_future(store.wait("watched", timeout=30))
        try:
            while not store.stats()["cache_reads_trusted"]:
                await asyncio.sleep(0.001)
            await store.update_request("r1", note("cached"))
            assert store._cached("r1") is not None
            _, doc = raw_doc(path, "r1")
            doc["waiter"] = "edited"
            conn = sqlite3.connect(path)
            with conn:
                conn.execute("UPDATE requests SET doc = ? WHERE id = 'r1'", (json.dumps(doc),))
            conn.close()
            assert store._cached("r1") is None
            assert (await store.get_request("r1")).waiter == "edited"  # type: ignore[union-attr]
        finally:
            waiting.cancel()
