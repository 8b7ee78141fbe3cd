"""What only the SQLite backend promises: the file, its schema, tamper evidence, other processes."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from signoff.model import ApprovalRequest, AuditEvent, StoreError, utcnow
from signoff.store import AuditQuery, SQLiteStore
from signoff.store._sqlite_rows import DUE_SQL, NEXT_DUE_SQL
from signoff.store._sqlite_schema import SCHEMA_VERSION
from tests.store.factories import created_events, decide, decision, make_request, subprocess_env

pytestmark = pytest.mark.asyncio


async def stored(store: SQLiteStore, **kw: object) -> ApprovalRequest:
    request = make_request(**kw)  # type: ignore[arg-type]
    await store.create_request(request, created_events(request))
    return request


def raw(store: SQLiteStore) -> sqlite3.Connection:
    """A connection behind the store's back, as an attacker or a careless script would use."""
    return sqlite3.connect(store.path, isolation_level=None)


async def lifecycle(store: SQLiteStore) -> ApprovalRequest:
    request = await stored(store)
    await decide(store, request.id, decision(approver="alice"))
    return request


# ---------------------------------------------------------------- file and schema
async def test_database_uses_wal_and_synchronous_full_by_default(sqlite_store: SQLiteStore) -> None:
    await lifecycle(sqlite_store)
    with raw(sqlite_store) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert sqlite_store.synchronous == "FULL"


async def test_requests_and_audit_survive_reopening_the_file(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "s.db") as first:
        request = await lifecycle(first)
        audit = await first.read_audit()
    async with SQLiteStore(tmp_path / "s.db") as second:
        again = await second.get_request(request.id)
        assert again is not None and again.status == "resolved"
        assert await second.read_audit() == audit
        assert (await second.verify_audit()).ok


async def test_a_newer_schema_version_is_refused(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "s.db"):
        pass
    with sqlite3.connect(tmp_path / "s.db") as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="upgrade signoff"):
        await SQLiteStore(tmp_path / "s.db").open()


async def test_a_file_that_is_not_a_database_gives_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"this is not a database" * 100)
    store = SQLiteStore(path)
    with pytest.raises(StoreError, match="not a database"):
        await store.open()
    await store.close()


async def test_an_unwritable_location_gives_a_store_error(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "missing-dir" / "s.db")
    with pytest.raises(StoreError, match="opening the database"):
        await store.get_request("x")
    await store.close()


async def test_a_closed_store_refuses_work(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    await store.open()
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        await store.get_request("x")
    with pytest.raises(StoreError, match="closed"):
        store.audit_nowait(AuditEvent(event="allowed"))


async def test_a_held_write_lock_beyond_the_busy_timeout_is_a_store_error(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db", busy_timeout_ms=100)
    await store.open()
    blocker = sqlite3.connect(store.path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreError, match="locked"):
            await stored(store)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
        await store.close()


async def test_integrity_check_is_ok(sqlite_store: SQLiteStore) -> None:
    await lifecycle(sqlite_store)
    assert await sqlite_store.integrity_check() == "ok"


async def test_sweeper_queries_use_the_partial_due_index(sqlite_store: SQLiteStore) -> None:
    await lifecycle(sqlite_store)
    with raw(sqlite_store) as conn:
        for sql, args in ((DUE_SQL, (1.0, 10)), (NEXT_DUE_SQL, ())):
            plan = conn.execute("EXPLAIN QUERY PLAN " + sql, args).fetchall()
            text = " ".join(str(row[-1]) for row in plan)
            assert "USING INDEX requests_due" in text or "COVERING INDEX requests_due" in text
            assert "TEMP B-TREE" not in text, text


# ---------------------------------------------------------------- tamper evidence
async def test_audit_rows_refuse_update(sqlite_store: SQLiteStore) -> None:
    await lifecycle(sqlite_store)
    with raw(sqlite_store) as conn, pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE audit SET actor = 'mallory' WHERE seq = 2")


async def test_audit_rows_refuse_delete(sqlite_store: SQLiteStore) -> None:
    await lifecycle(sqlite_store)
    with raw(sqlite_store) as conn, pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("DELETE FROM audit WHERE seq = 1")


def tamper(store: SQLiteStore, sql: str) -> None:
    """Edit the audit table the way a determined insider could: drop the guard, edit, restore."""
    conn = raw(store)
    (trigger_sql,) = conn.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'audit_no_update'"
    ).fetchone()
    conn.execute("DROP TRIGGER audit_no_update")
    conn.execute(sql)
    conn.execute(trigger_sql)
    conn.close()


async def test_edited_audit_row_is_reported_by_verify(sqlite_store: SQLiteStore) -> None:
    await lifecycle(sqlite_store)
    assert (await sqlite_store.verify_audit()).ok
    tamper(sqlite_store, """UPDATE audit SET data = '{"type":"reject"}' WHERE seq = 2""")
    verification = await sqlite_store.verify_audit()
    assert not verification.ok
    assert verification.broken_seq == 2
    assert verification.checked == 1
    assert "hash mismatch" in (verification.problem or "")


async def test_edited_row_with_recomputed_hash_breaks_the_next_link(
    sqlite_store: SQLiteStore,
) -> None:
    await lifecycle(sqlite_store)
    tamper(sqlite_store, "UPDATE audit SET hash = printf('%064d', 7) WHERE seq = 2")
    verification = await sqlite_store.verify_audit()
    assert verification.broken_seq == 2  # its own hash no longer matches its content
    assert "hash mismatch" in (verification.problem or "")


async def test_removed_audit_row_is_reported_as_a_gap(sqlite_store: SQLiteStore) -> None:
    await lifecycle(sqlite_store)
    with raw(sqlite_store) as conn:
        conn.execute("DROP TRIGGER audit_no_delete")
        conn.execute("DELETE FROM audit WHERE seq = 2")
    verification = await sqlite_store.verify_audit()
    assert verification.broken_seq == 3
    assert "gap in seq" in (verification.problem or "")


async def test_verify_walks_a_log_longer_than_one_chunk(sqlite_store: SQLiteStore) -> None:
    await sqlite_store.append_audit([AuditEvent(event="allowed", tool="t") for _ in range(4500)])
    verification = await sqlite_store.verify_audit()
    assert verification.ok and verification.checked == 4500


# ---------------------------------------------------------------- batching
async def test_audit_nowait_events_are_committed_without_an_explicit_flush(
    sqlite_store: SQLiteStore,
) -> None:
    sqlite_store.audit_nowait(AuditEvent(event="allowed", tool="t"))
    for _ in range(500):  # the writer's timer commits the batch; correctness, not timing
        if await sqlite_store.read_audit(AuditQuery(event="allowed")):
            break
        await asyncio.sleep(0.01)
    assert len(await sqlite_store.read_audit(AuditQuery(event="allowed"))) == 1
    assert sqlite_store.stats()["audit_batches"] >= 1


async def test_failed_audit_flush_raises_and_keeps_the_events(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db", busy_timeout_ms=100)
    await store.open()
    blocker = sqlite3.connect(store.path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        store.audit_nowait(AuditEvent(event="allowed", tool="t"))
        with pytest.raises(StoreError, match="locked"):
            await store.flush_audit()
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    await store.flush_audit()
    assert [r.event for r in await store.read_audit()] == ["allowed"]
    await store.close()


async def test_audit_queued_before_open_is_written_at_close(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    store.audit_nowait(AuditEvent(event="denied", tool="rm"))
    await store.close()
    async with SQLiteStore(tmp_path / "s.db") as reopened:
        assert [r.event for r in await reopened.read_audit()] == ["denied"]


async def test_two_stores_on_one_file_keep_one_chain(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "s.db") as a, SQLiteStore(tmp_path / "s.db") as b:
        for i in range(20):
            (a if i % 2 else b).audit_nowait(AuditEvent(event="allowed", data={"i": i}))
            await (a if i % 3 else b).append_audit([AuditEvent(event="denied", data={"i": i})])
        await a.flush_audit()
        await b.flush_audit()
        verification = await a.verify_audit()
    assert verification.ok and verification.checked == 40


# ---------------------------------------------------------------- other processes
def decide_in_another_process(store: SQLiteStore, request_id: str, approver: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "tests.store.decide_once", store.path, request_id, approver],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


async def test_decision_by_another_process_wakes_the_waiter(sqlite_store: SQLiteStore) -> None:
    request = await stored(sqlite_store)
    waiter = asyncio.create_task(sqlite_store.wait(request.id, timeout=60))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    assert await asyncio.to_thread(decide_in_another_process, sqlite_store, request.id, "carol")
    done = await asyncio.wait_for(waiter, 60)
    assert done.status == "resolved"
    assert done.decisions[0].approver == "carol"
    # Woken by the watcher (its first look counts as a start-up check, not a "wake" in the
    # stats, when the other process commits before the watcher's first read).


async def test_watcher_stops_when_nobody_waits(sqlite_store: SQLiteStore) -> None:
    request = await stored(sqlite_store, quorum=2)
    await sqlite_store.wait(request.id, timeout=0.05)
    for _ in range(500):
        if not sqlite_store.stats()["watcher_running"]:
            break
        await asyncio.sleep(0.01)
    assert sqlite_store.stats()["watcher_running"] is False


async def test_listener_hears_a_change_made_by_another_process(
    sqlite_store: SQLiteStore,
) -> None:
    request = await stored(sqlite_store)
    heard: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    sqlite_store.add_listener(
        lambda req, event: loop.call_soon_threadsafe(heard.put_nowait, (req.id, event))
    )
    await asyncio.sleep(0.1)  # let the watcher take its first look
    await asyncio.to_thread(decide_in_another_process, sqlite_store, request.id, "dave")
    assert await asyncio.wait_for(heard.get(), 60) == (request.id, "resolved")


async def test_waiters_on_a_closed_store_get_a_store_error(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    request = await stored(store)  # opens lazily
    waiter = asyncio.create_task(store.wait(request.id, timeout=60))
    await asyncio.sleep(0.05)
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await asyncio.wait_for(waiter, 10)


async def test_created_at_and_due_at_columns_match_the_document(
    sqlite_store: SQLiteStore,
) -> None:
    request = await stored(sqlite_store, timeout_s=90)
    with raw(sqlite_store) as conn:
        created, due = conn.execute(
            "SELECT created_at, due_at FROM requests WHERE id = ?", (request.id,)
        ).fetchone()
    assert created == request.created_at.timestamp()
    assert due == request.expires_at.timestamp()
    assert (await sqlite_store.next_due_at()) == request.expires_at
    assert request.created_at <= utcnow()


async def test_hot_path_audit_is_written_without_anyone_awaiting_the_store(
    tmp_path: Path,
) -> None:
    """A gate that only allows/denies never awaits the store; its rows must still land
    within the batch interval, not at close()."""
    store = SQLiteStore(tmp_path / "hot.db")
    try:
        store.audit_nowait(AuditEvent(event="allowed", tool="get_price"))
        count = 0
        for _ in range(300):
            await asyncio.sleep(0.05)
            count = await asyncio.to_thread(_audit_rows, tmp_path / "hot.db")
            if count:
                break
        assert count == 1
    finally:
        await store.close()


def _audit_rows(path: Path) -> int:
    if not path.exists():
        return 0
    db = sqlite3.connect(path)
    try:
        return int(db.execute("SELECT count(*) FROM audit").fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()
