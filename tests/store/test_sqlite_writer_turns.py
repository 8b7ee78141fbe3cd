"""How the SQLite writer gathers its groups and answers them (issue #15, round 4):

* the jobs one event loop queues in one turn wake the writer once, at that loop's next turn,
  so they start one group together;
* jobs queued while a group runs join it before its COMMIT — but never a flush job (the audit
  events it answers for were taken when the group started) and never a lone job's
  transaction (it runs without a savepoint);
* a waiter on the decider's loop is woken in the same hop that answers the decider.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

from signoff.store import SQLiteStore
from tests.store.factories import created_events, decide, decision, make_request
from tests.store.test_sqlite_group_commit import new_request
from tests.store.test_wake_hops import (
    HopCounter,
    waiting_on_another_loop,
    waiting_on_new_request,
)


class Blocked:
    """A group of two jobs whose first one blocks the writer until released."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store
        self.started = threading.Event()
        self.release = threading.Event()

    async def __aenter__(self) -> Blocked:
        def block(conn: sqlite3.Connection) -> None:
            self.started.set()
            self.release.wait(30)

        # queued in one turn of this loop: one group, so not a lone job's transaction
        self.jobs = [
            asyncio.ensure_future(self.store._write(block)),
            asyncio.ensure_future(self.store._write(lambda conn: None)),
        ]
        await asyncio.to_thread(self.started.wait, 30)
        self.groups_before = self.store._writer.groups  # the running group not counted yet
        return self

    async def queued(self, count: int) -> None:
        while len(self.store._writer._jobs) < count:
            await asyncio.sleep(0)

    async def __aexit__(self, *exc: object) -> None:
        self.release.set()
        await asyncio.gather(*self.jobs)


async def test_jobs_queued_in_one_turn_of_a_loop_start_one_group(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        await new_request(store, "warm")  # the schema and the probe are set up
        groups, jobs = store._writer.groups, store._writer.group_jobs
        await asyncio.gather(*(new_request(store, f"r{i}") for i in range(8)))
        assert store._writer.groups == groups + 1
        assert store._writer.group_jobs == jobs + 8


async def test_jobs_queued_while_a_group_runs_join_its_commit(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        async with Blocked(store) as blocked:
            late = [asyncio.ensure_future(new_request(store, f"r{i}")) for i in range(3)]
            await blocked.queued(3)
        results = await asyncio.gather(*late)
        assert all(created for _, created in results)
        assert store._writer.groups == blocked.groups_before + 1
        assert (await store.verify_audit()).ok


async def test_a_flush_queued_while_a_group_runs_waits_for_the_next_group(
    tmp_path: Path,
) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        async with Blocked(store) as blocked:
            flushed = asyncio.wrap_future(store._writer.flush())
            await blocked.queued(1)
        await flushed
        assert store._writer.groups == blocked.groups_before + 2


async def test_a_lone_jobs_transaction_takes_no_later_job(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        started, release = threading.Event(), threading.Event()

        def block(conn: sqlite3.Connection) -> None:
            started.set()
            release.wait(30)

        alone = asyncio.ensure_future(store._write(block))
        await asyncio.to_thread(started.wait, 30)
        groups = store._writer.groups
        late = asyncio.ensure_future(new_request(store, "r1"))
        while not store._writer._jobs:
            await asyncio.sleep(0)
        release.set()
        await asyncio.gather(alone, late)
        assert store._writer.groups == groups + 2


async def test_a_waiter_on_the_deciders_loop_is_woken_in_the_answering_hop(
    tmp_path: Path,
) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        request_id, waiter = await waiting_on_new_request(store, store._waiters.ids)
        with HopCounter() as hops:
            await decide(store, request_id, decision())
            woken = await waiter
        assert woken.status == "resolved"
        writer_hops = [t for t in hops.threads if t.name.startswith("signoff-sqlite-writer")]
        assert len(writer_hops) == 1  # the decider's answer and the waiter's wake together


async def test_a_waiter_on_a_loop_without_callers_in_the_group_is_still_woken(
    tmp_path: Path,
) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        request = make_request()
        await store.create_request(request, created_events(request))
        other = await waiting_on_another_loop(store, request.id)
        decided = await asyncio.to_thread(
            lambda: asyncio.run(decide(store, request.id, decision()))  # a third loop decides
        )
        assert decided.request.status == "resolved"
        assert await other == "resolved"
