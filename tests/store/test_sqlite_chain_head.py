"""The audit chain head inside a SQLite group commit: read from the database by the group's
first append and kept for the others; forgotten when a savepoint or the transaction rolls
back (``test_sqlite_group_commit.py`` covers a failing job mid-group), and read again by the
next group, so rows another writer appended in between are chained after."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from signoff.store import SQLiteStore
from signoff.store import _sqlite_rows as rows
from tests.store.factories import created_events, make_request
from tests.store.test_sqlite_group_commit import HeldWriter, new_request

HEAD_QUERY = "SELECT seq, hash FROM audit"


async def test_the_jobs_of_one_group_read_the_chain_head_once(tmp_path: Path) -> None:
    seen: list[str] = []
    async with SQLiteStore(tmp_path / "s.db") as store:
        await store._write(
            lambda conn: conn.set_trace_callback(
                lambda sql: seen.append(sql) if HEAD_QUERY in sql else None
            )
        )
        async with HeldWriter(store) as held:
            tasks = await held.queue(*(new_request(store, f"r{i}") for i in range(6)))
        for task in tasks:
            assert (await task)[1]
        assert store._writer.groups == held.groups_before + 2  # the held job, then one group
        assert len(seen) == 1
        verification = await store.verify_audit()
        assert verification.ok and verification.checked == 6


async def test_rows_another_writer_appends_between_groups_are_chained_after(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    async with SQLiteStore(path) as first, SQLiteStore(path) as second:
        for i in range(4):
            for n, store in enumerate((first, second)):
                async with HeldWriter(store) as held:
                    tasks = await held.queue(
                        new_request(store, f"s{n}-{i}-a"), new_request(store, f"s{n}-{i}-b")
                    )
                for task in tasks:
                    assert (await task)[1]
        verification = await first.verify_audit()
        assert verification.ok and verification.checked == 16
        assert [r.seq for r in await second.read_audit()] == list(range(1, 17))


async def test_a_failing_first_job_leaves_the_next_jobs_a_head_to_read(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        await new_request(store, "before")

        def half_done(conn: sqlite3.Connection) -> None:
            bad = make_request(request_id="bad", thread="bad")
            rows.insert_audit(conn, created_events(bad), store.origin)
            raise RuntimeError("the job failed after its audit rows")

        async with HeldWriter(store) as held:
            bad, a, b = await held.queue(
                store._write(half_done), new_request(store, "a"), new_request(store, "b")
            )
        assert (await a)[1] and (await b)[1]
        assert isinstance(bad.exception(), RuntimeError)
        verification = await store.verify_audit()
        assert verification.ok and verification.checked == 3
        assert [r.request_id for r in await store.read_audit()] == ["before", "a", "b"]
