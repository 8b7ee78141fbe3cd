"""A SQLite group commit inserts its jobs' audit rows with one ``executemany`` just before
its COMMIT (``ChainHead.flush``); a job whose savepoint rolls back takes its rows back out
(``test_sqlite_group_commit.py``: a failing job rolls back alone)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from signoff.model import AuditEvent, StoreError
from signoff.store import SQLiteStore
from tests.store.test_sqlite_group_commit import HeldWriter, new_request


async def test_a_groups_audit_rows_are_inserted_together_before_its_commit(
    tmp_path: Path,
) -> None:
    seen: list[str] = []
    async with SQLiteStore(tmp_path / "s.db") as store:
        await store._write(lambda conn: conn.set_trace_callback(seen.append))
        async with HeldWriter(store) as held:
            tasks = await held.queue(*(new_request(store, f"r{i}") for i in range(3)))
        for task in tasks:
            assert (await task)[1]
        last_job = max(i for i, sql in enumerate(seen) if sql.startswith("RELEASE"))
        audit = [i for i, sql in enumerate(seen) if sql.startswith("INSERT INTO audit")]
        commit = max(i for i, sql in enumerate(seen) if sql == "COMMIT")
        assert len(audit) == 3 and last_job < min(audit) and max(audit) == commit - 1
        verification = await store.verify_audit()
        assert verification.ok and verification.checked == 3


async def test_an_audit_insert_that_fails_at_the_commit_fails_the_whole_group(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    async with SQLiteStore(path) as store:
        await new_request(store, "before")
        conn = sqlite3.connect(path)
        with conn:
            conn.execute(
                "CREATE TRIGGER refuse_boom BEFORE INSERT ON audit WHEN NEW.data LIKE '%boom%' "
                "BEGIN SELECT RAISE(ABORT, 'boom refused'); END"
            )
        conn.close()
        boom = AuditEvent(event="notified", actor="test", data={"why": "boom"})
        async with HeldWriter(store) as held:
            ok, refused = await held.queue(new_request(store, "ok"), store.append_audit([boom]))
        for task in (ok, refused):
            with pytest.raises(StoreError, match="boom refused"):
                await task
        assert await store.get_request("ok") is None  # nothing of the group was written
        assert (await new_request(store, "after"))[1]
        assert [r.request_id for r in await store.read_audit()] == ["before", "after"]
        assert (await store.verify_audit()).ok


async def test_later_groups_reuse_the_head_until_another_connection_commits(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    head_reads: list[str] = []
    async with SQLiteStore(path) as store, SQLiteStore(path) as other:
        await store._write(
            lambda conn: conn.set_trace_callback(
                lambda sql: head_reads.append(sql) if "SELECT seq, hash FROM audit" in sql else None
            )
        )
        for i in range(3):
            await new_request(store, f"a{i}")  # a group each
        assert len(head_reads) == 1
        await new_request(other, "between")  # another connection appends to the chain
        await new_request(store, "after")
        assert len(head_reads) == 2  # read again where the database has it
        verification = await store.verify_audit()
        assert verification.ok and verification.checked == 5
