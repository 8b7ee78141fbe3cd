"""Group commit on the SQLite writer: jobs queued together share one transaction (one fsync),
a failing job rolls back alone, a group SQLite rolls back answers nobody with success, and a
SIGKILL mid-group loses nothing that was answered and runs nothing twice."""

from __future__ import annotations

import asyncio
import random
import signal
import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

from signoff.model import StoreError
from signoff.store import SQLiteStore
from signoff.store import _sqlite_rows as rows
from tests.store.factories import created_events, decide, decision, make_request, subprocess_env
from tests.store.group_commit_worker import AGENTS, cycle_ids


class HeldWriter:
    """Holds the writer thread in a job of its own while a test queues the next group."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store
        self._release = threading.Event()
        self._held = threading.Event()

    async def __aenter__(self) -> HeldWriter:
        def hold(conn: sqlite3.Connection) -> None:
            self._held.set()
            self._release.wait(30)

        self._job = asyncio.ensure_future(self.store._write(hold))
        await asyncio.to_thread(self._held.wait, 30)
        self.groups_before = self.store._writer.groups
        return self

    async def queue(self, *calls: Awaitable[Any]) -> list[asyncio.Task[Any]]:
        """Start ``calls`` in order; return once the writer has every one of them queued."""
        queued = len(self.store._writer._jobs)
        tasks = [asyncio.ensure_future(c) for c in calls]
        while len(self.store._writer._jobs) < queued + len(calls):
            await asyncio.sleep(0)
        return tasks

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()
        await self._job


async def new_request(store: SQLiteStore, request_id: str) -> Any:
    request = make_request(request_id=request_id, thread=request_id)
    return await store.create_request(request, created_events(request))


async def test_jobs_queued_together_commit_in_one_transaction(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        async with HeldWriter(store) as held:
            tasks = await held.queue(*(new_request(store, f"r{i}") for i in range(8)))
        results = await asyncio.gather(*tasks)
        assert all(created for _, created in results)
        assert store._writer.groups == held.groups_before + 2  # the held job, then one group
        assert len(await store.list_requests()) == 8
        assert (await store.verify_audit()).checked == 8


async def test_a_failing_job_rolls_back_alone(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:

        def half_done(conn: sqlite3.Connection) -> None:
            bad = make_request(request_id="bad", thread="bad")
            rows.insert_request(conn, bad, {"call-1": "x"})
            rows.insert_audit(conn, created_events(bad), store.origin)
            raise RuntimeError("the job failed after writing")

        async with HeldWriter(store) as held:
            a, bad, b = await held.queue(
                new_request(store, "a"), store._write(half_done), new_request(store, "b")
            )
        assert (await a)[1] and (await b)[1]
        with pytest.raises(RuntimeError, match="failed after writing"):
            await bad
        assert store._writer.groups == held.groups_before + 2
        assert await store.get_request("bad") is None
        assert await store.get_request("a") is not None
        assert await store.get_request("b") is not None
        verification = await store.verify_audit()
        assert verification.ok and verification.checked == 2
        assert [r.request_id for r in await store.read_audit()] == ["a", "b"]


async def test_a_failing_job_alone_in_its_group_leaves_nothing(tmp_path: Path) -> None:
    """A group of one job runs without a savepoint: its failure rolls back the transaction."""
    async with SQLiteStore(tmp_path / "s.db") as store:

        def half_done(conn: sqlite3.Connection) -> None:
            bad = make_request(request_id="bad", thread="bad")
            rows.insert_request(conn, bad, {"call-1": "x"})
            rows.insert_audit(conn, created_events(bad), store.origin)
            raise RuntimeError("the job failed after writing")

        with pytest.raises(RuntimeError, match="failed after writing"):
            await store._write(half_done)
        assert await store.get_request("bad") is None
        assert (await new_request(store, "next"))[1]
        assert [r.request_id for r in await store.read_audit()] == ["next"]
        assert (await store.verify_audit()).ok


async def test_a_group_sqlite_rolls_back_answers_nobody_with_success(tmp_path: Path) -> None:
    """A full disk rolls back the whole transaction, not one statement: the jobs before it in
    the group are answered with the error, their waiters are not woken, and the next job
    chains its audit row after the database's head, not after the lost rows."""
    async with SQLiteStore(tmp_path / "s.db") as store:
        await new_request(store, "waited")
        head = await store.audit_head()
        waiter = asyncio.ensure_future(store.wait("waited", timeout=60))
        while not store.stats()["waiters"]:
            await asyncio.sleep(0)

        def disk_full(conn: sqlite3.Connection) -> None:
            conn.execute("ROLLBACK")  # what SQLite does on SQLITE_FULL / SQLITE_IOERR
            raise sqlite3.OperationalError("database or disk is full")

        async with HeldWriter(store) as held:
            lost_create, lost_decide, failing, after = await held.queue(
                new_request(store, "lost"),
                decide(store, "waited", decision()),
                store._write(disk_full),
                new_request(store, "after"),
            )
        for lost in (lost_create, lost_decide):
            with pytest.raises(StoreError, match="rolled back with the other writes"):
                await lost
        with pytest.raises(sqlite3.OperationalError):
            await failing
        assert (await after)[1]
        assert await store.get_request("lost") is None
        assert (await store.get_request("waited")).status == "pending"  # type: ignore[union-attr]
        assert not waiter.done()
        records = await store.read_audit()
        assert [(r.seq, r.request_id) for r in records[-1:]] == [(head[0] + 1, "after")]
        assert records[-1].prev_hash == head[1]
        assert (await store.verify_audit()).ok
        await decide(store, "waited", decision())
        assert (await waiter).status == "resolved"


def read_answers(lines: list[str]) -> set[tuple[str, str]]:
    return {tuple(line.split()) for line in lines if len(line.split()) == 2}  # type: ignore[misc]


def run_and_kill(path: Path, ranlog: Path, n: int, rng: random.Random) -> set[tuple[str, str]]:
    """Start the worker, SIGKILL it after a random number of answers; the answers it printed."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.store.group_commit_worker", str(path), str(ranlog), str(n)],
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    assert worker.stdout is not None
    assert worker.stdout.readline().strip() == "started"
    lines = []
    stop_after = rng.randrange(20, 400)
    for line in worker.stdout:
        lines.append(line)
        if len(lines) >= stop_after:
            worker.send_signal(signal.SIGKILL)
            break
    worker.wait()
    worker.stdout.close()
    return read_answers(lines)


def missing_answers(path: Path, answered: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """Answered store calls whose effect is not in the database."""
    with sqlite3.connect(path) as conn:
        events = set(conn.execute("SELECT event, request_id FROM audit"))
    needs = {"created": "created", "decided": "resolved", "claimed": "executing"}
    needs["finished"] = "executed"
    return sorted(a for a in answered if (needs[a[0]], a[1]) not in events)


@pytest.mark.slow
async def test_sigkill_mid_group_loses_no_answered_job_and_runs_no_call_twice(
    tmp_path: Path,
) -> None:
    path, ranlog = tmp_path / "cycles.db", tmp_path / "ran.log"
    n, rng = 400, random.Random(20261127)
    for _ in range(5):
        answered = await asyncio.to_thread(run_and_kill, path, ranlog, n, rng)
        assert answered, "the worker answered nothing before the kill"
        assert missing_answers(path, answered) == []
    final = subprocess.run(
        [sys.executable, "-m", "tests.store.group_commit_worker", str(path), str(ranlog), str(n)],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=300,
    )
    assert final.returncode == 0, final.stderr
    assert missing_answers(path, read_answers(final.stdout.splitlines())) == []

    ran = Counter(line.split()[1] for line in ranlog.read_text().splitlines())
    assert max(ran.values()) == 1, [rid for rid, count in ran.items() if count > 1]
    with sqlite3.connect(path) as conn:
        events = Counter(conn.execute("SELECT request_id, event FROM audit"))
    for rid in cycle_ids(n):
        assert events[(rid, "created")] == 1 and events[(rid, "executing")] == 1, rid
        # a call runs only after its claim was committed, and at most once
        assert ran[rid] <= 1
        if events[(rid, "executed")]:
            assert ran[rid] == 1, rid
    assert sum(events[(rid, "executed")] for rid in cycle_ids(n)) >= n - 5 * AGENTS
    async with SQLiteStore(path) as store:
        assert (await store.verify_audit()).ok
        assert await store.integrity_check() == "ok"


async def test_a_group_that_cannot_begin_fails_with_what_to_do(tmp_path: Path) -> None:
    """BEGIN IMMEDIATE behind another process's write lock: the caller gets the StoreError
    naming the step and the busy-timeout hint, and the next write works once it is free."""
    path = tmp_path / "s.db"
    async with SQLiteStore(path, busy_timeout_ms=0) as store:
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            with pytest.raises(StoreError) as raised:
                await new_request(store, "req-locked")
            other.execute("ROLLBACK")
        finally:
            other.close()
        text = str(raised.value)
        assert "starting a write transaction failed" in text
        assert "raise busy_timeout_ms" in text
        assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
        await new_request(store, "req-free")
        assert await store.get_request("req-free") is not None
        assert await store.get_request("req-locked") is None
