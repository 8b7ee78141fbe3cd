"""The SQLite doorbell: a commit in one process wakes the waiters of every other process at
once (their stores poll data_version only once an hour here), a dead waiter's socket is
removed by the next ring, and without a doorbell the watcher still polls."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from signoff.store import SQLiteStore
from signoff.store._sqlite_wake import wake_dir
from tests.store.factories import created_events, decide, decision, make_request, subprocess_env


async def pending(store: SQLiteStore, request_id: str = "r1") -> str:
    request = make_request(request_id=request_id, thread=request_id)
    await store.create_request(request, created_events(request))
    return request_id


class Waiter:
    """A waiting process (tests/store/wake_waiter.py)."""

    def __init__(self, db: Path, request_id: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.store.wake_waiter", str(db), request_id],
            stdout=subprocess.PIPE,
            text=True,
            env=subprocess_env(),
        )
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline().split()
        assert first[0] == "waiting", first
        self.socket = first[1]

    def outcome(self, timeout: float = 60) -> str:
        out, _ = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0
        return out.strip()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@contextmanager
def waiters(db: Path, request_id: str, n: int) -> Iterator[list[Waiter]]:
    started: list[Waiter] = []
    try:
        for _ in range(n):
            started.append(Waiter(db, request_id))
        yield started
    finally:
        for w in started:
            if w.proc.poll() is None:
                w.kill()


async def test_a_decision_in_another_process_wakes_every_waiting_process(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with SQLiteStore(db) as store:
        rid = await pending(store)
        with waiters(db, rid, 3) as procs:
            await decide(store, rid, decision())
            outcomes = [await asyncio.to_thread(w.outcome) for w in procs]
        assert outcomes == ["resolved"] * 3
        assert store.stats()["doorbell_rings"] >= 3


async def test_a_process_that_decides_and_exits_at_once_still_rings(tmp_path: Path) -> None:
    """Like `signoff approve`: open, decide, close, exit. The ring after the last commit
    happens before the store closes its doorbell."""
    db = tmp_path / "s.db"
    async with SQLiteStore(db) as store:
        rid = await pending(store)
    with waiters(db, rid, 1) as (waiter,):
        decided = subprocess.run(
            [sys.executable, "-m", "tests.store.decide_once", str(db), rid, "carol"],
            env=subprocess_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert decided.stdout.strip() == "resolved"
        assert await asyncio.to_thread(waiter.outcome) == "resolved"


async def test_a_dead_waiters_socket_is_removed_by_the_next_ring(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with SQLiteStore(db) as store:
        rid = await pending(store)
        with waiters(db, rid, 2) as (dead, alive):
            dead.kill()  # SIGKILL: its socket file stays behind
            assert os.path.exists(dead.socket)
            await pending(store, "r2")  # a commit rings both: the dead one is refused
            await store.flush_audit()  # a later job on the writer: the ring above is done
            assert not os.path.exists(dead.socket)
            assert store._doorbell.stale_removed == 1
            assert os.path.exists(alive.socket)
            await decide(store, rid, decision())
            assert await asyncio.to_thread(alive.outcome) == "resolved"


async def test_a_stale_socket_left_by_an_earlier_run_does_not_stop_the_wake(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    directory = wake_dir(str(db))
    os.makedirs(directory)
    stale = os.path.join(directory, "1-deadbeef.s")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(stale)  # closed without unlinking: what a crashed process leaves
    async with SQLiteStore(db) as store:
        rid = await pending(store)
        with waiters(db, rid, 1) as (waiter,):
            await decide(store, rid, decision())
            assert await asyncio.to_thread(waiter.outcome) == "resolved"
        await store.flush_audit()  # a later writer job: the ring is over
        assert not os.path.exists(stale)


async def test_without_a_doorbell_the_watcher_polls_data_version(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    Path(wake_dir(str(db))).write_text("not a directory")  # no socket can be bound there
    async with SQLiteStore(db, wake_interval_s=0.01) as waiting, SQLiteStore(db) as other:
        rid = await pending(other)
        waiter = asyncio.ensure_future(waiting.wait(rid, timeout=60))
        while not waiting.stats()["watcher_running"]:
            await asyncio.sleep(0.001)
        await decide(other, rid, decision())  # another connection: only data_version tells
        assert (await asyncio.wait_for(waiter, 60)).status == "resolved"
        stats = waiting.stats()
        assert stats["doorbell"] is False
        assert stats["data_version_checks"] >= 1  # polled (a first read may see it first)


def test_a_database_path_too_long_for_a_socket_uses_a_short_directory(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 100) / "signoff.db"
    directory = wake_dir(str(deep))
    assert not directory.startswith(str(tmp_path))
    assert len(os.path.join(directory, f"{2**22}-0123abcd.s")) <= 107
    assert directory == wake_dir(str(deep))  # every process finds the same one


def test_beside_the_database_when_the_path_is_short(tmp_path: Path) -> None:
    db = Path("/tmp") / "s.db"
    assert wake_dir(str(db)) == os.path.realpath(db) + "-wake"


async def test_a_doorbell_that_cannot_be_bound_is_reported_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "s.db"
    Path(wake_dir(str(db))).write_text("not a directory")
    async with SQLiteStore(db, wake_interval_s=0.01) as store:
        rid = await pending(store)
        for _ in range(2):  # the watcher starts, stops when nobody waits, starts again
            await store.wait(rid, timeout=0.05)
            while store.stats()["watcher_running"]:
                await asyncio.sleep(0.01)
    falls_back = [r for r in caplog.records if "falls back to polling" in r.getMessage()]
    assert len(falls_back) == 1
