"""A background loop whose store keeps failing says so once, reminds now and then, and says
when it works again — not a traceback per pass (the sweeper and the grant refresh used to
log one every pass while their store was down or closed under a running gate)."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

import pytest

from signoff import Gate
from signoff._failing import Failing
from signoff.gate import grants
from signoff.model import StoreError
from signoff.store import MemoryStore
from tests.gate.conftest import make_policy, wait_until

log = logging.getLogger("tests.failing")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, bool]]:
    return [(r.getMessage(), r.exc_info is not None) for r in caplog.records]


def test_the_first_failure_is_logged_with_its_traceback_then_repeats_are_quiet(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    failing = Failing(log, "the pass", remind_s=60, clock=clock)
    caplog.set_level(logging.INFO, logger="tests.failing")
    for _ in range(50):
        try:
            raise StoreError("database is locked")
        except StoreError as exc:
            failing.failed(exc)
        clock.now += 1  # 50 passes in 50 s: under the reminder's 60 s
    assert _lines(caplog) == [("the pass failed; retrying", True)]
    assert failing.failures == 50


def test_the_same_failure_is_recalled_once_per_remind_interval() -> None:
    clock = Clock()
    failing = Failing(log, "the pass", remind_s=60, clock=clock)
    said: list[str] = []
    handler = _Collect(said)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        for _ in range(121):  # one pass a second for two minutes
            failing.failed(StoreError("down"))
            clock.now += 1
    finally:
        log.removeHandler(handler)
    assert said == [
        "the pass failed; retrying",
        "the pass still failing: 61 passes in 60 s, the last with StoreError: down",
        "the pass still failing: 121 passes in 120 s, the last with StoreError: down",
    ]


def test_a_different_failure_is_logged_at_once_and_recovery_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    failing = Failing(log, "the pass", clock=clock)
    caplog.set_level(logging.INFO, logger="tests.failing")
    failing.failed(StoreError("down"))
    failing.failed(StoreError("down"))
    failing.failed(OSError("disk full"))  # a new cause: with its traceback, at once
    clock.now += 7
    failing.worked()
    failing.worked()  # already working: nothing more
    failing.failed(StoreError("down"), traceback=False)  # a new episode
    assert _lines(caplog) == [
        ("the pass failed; retrying", True),
        ("the pass failed; retrying", True),
        ("the pass works again after 3 failed passes over 7 s", False),
        ("the pass failed; retrying", False),
    ]
    assert caplog.records[1].exc_info is not None
    assert isinstance(caplog.records[1].exc_info[1], OSError)
    assert caplog.records[3].error == "StoreError: down"  # type: ignore[attr-defined]


class _Collect(logging.Handler):
    def __init__(self, said: list[str]) -> None:
        super().__init__()
        self.said = said

    def emit(self, record: logging.LogRecord) -> None:
        self.said.append(record.getMessage())


class FlakyStore(MemoryStore):
    """A MemoryStore whose reads the background loops make fail while ``down`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise StoreError("the store is unreachable")

    async def due_requests(self, now: datetime, limit: int = 100) -> list[str]:
        self._check()
        return await super().due_requests(now, limit)

    async def next_due_at(self) -> datetime | None:
        self._check()
        return await super().next_due_at()

    async def note_expired_grants(self, now: datetime) -> Any:
        self._check()
        return await super().note_expired_grants(now)

    async def grants_version(self) -> int:
        self._check()
        return await super().grants_version()


def test_a_running_gate_whose_store_fails_logs_each_loop_once_then_recovery(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(grants, "REFRESH_S", 0.005)
    caplog.set_level(logging.INFO, logger="signoff")
    store = FlakyStore()
    gate = Gate(make_policy(), store, sweep_interval=0.005)
    try:
        gate.start()
        sweeper, cache = gate.sweeper, gate.grant_cache
        store.down = True
        # many failed passes of each loop (counted, not timed)
        wait_until(
            lambda: sweeper.pass_failing.failures >= 30 and cache.refresh_failing.failures >= 30
        )
        failed = [m for m, _ in _lines(caplog) if "fail" in m]
        store.down = False
        wait_until(lambda: not sweeper.pass_failing.failures)
        wait_until(lambda: not cache.refresh_failing.failures)
        wait_until(lambda: not sweeper.grants_failing.failures)
    finally:
        gate.close()
    assert sorted(set(failed)) == [
        "noting expired grants failed; retrying next pass",
        "refreshing grants failed; keeping the ones loaded",
        "sweeper pass failed; retrying",
    ]
    assert len(failed) == 3  # one line per loop (its first failed pass), not one per pass
    recovered = [m for m, _ in _lines(caplog) if "works again" in m]
    assert {m.split(" works again")[0] for m in recovered} == {
        "sweeper pass",
        "refreshing grants",
        "noting expired grants",
    }
