"""Nothing lost under SIGKILL: a worker is killed at random moments and restarted until done.

What this proves: atomic create/decide, idempotent retries, first-valid-decision-wins across
restarts, expiry of deadlines that passed while nobody ran. What it cannot prove: fsync
discipline (a killed process leaves the OS page cache intact; see research §3). The settings
that matter for power loss are asserted at open instead (WAL, synchronous=FULL).
"""

from __future__ import annotations

import asyncio
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from signoff.model import ApprovalRequest, Transition, utcnow
from signoff.model.resolution import due_transition
from signoff.store import SQLiteStore
from tests.store.crash_worker import ACTORS, crash_ids, is_short
from tests.store.factories import subprocess_env

N_REQUESTS = 1000
KILLS = 10


def start_worker(path: Path, ledger: Path, n: int, mode: str) -> subprocess.Popen[str]:
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.store.crash_worker", str(path), str(ledger), str(n), mode],
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    assert worker.stdout is not None
    assert worker.stdout.readline().strip() == "started"
    return worker


def run_with_kills(path: Path, ledger: Path, n: int, kills: int) -> int:
    """Run the worker, SIGKILLing it ``kills`` times mid-work; returns the kills done."""
    rng = random.Random(20261121)
    done_kills = 0
    while True:
        worker = start_worker(path, ledger, n, "ok")
        if done_kills < kills:
            try:
                worker.wait(timeout=rng.uniform(0.2, 0.6))
            except subprocess.TimeoutExpired:
                worker.send_signal(signal.SIGKILL)
                worker.wait()
                done_kills += 1
                continue
        out, _ = worker.communicate(timeout=120)
        assert worker.returncode == 0 and "done" in out
        return done_kills


async def sweep_until_nothing_is_due(store: SQLiteStore) -> None:
    """What the gate's sweeper does after a restart: expire whatever is due, until nothing is."""

    def expire(now: object) -> object:
        def mutate(req: ApprovalRequest) -> Transition:
            return due_transition(req, now) or Transition(req, changed=False)  # type: ignore[arg-type]

        return mutate

    while True:
        now = utcnow()
        for request_id in await store.due_requests(now, limit=1000):
            await store.update_request(request_id, expire(now))  # type: ignore[arg-type]
        next_due = await store.next_due_at()
        if next_due is None or next_due > utcnow() + timedelta(seconds=30):
            return
        await asyncio.sleep(max(0.0, (next_due - utcnow()).total_seconds()) + 0.01)


def read_ledger(ledger: Path) -> dict[str, dict[str, list[str]]]:
    seen: dict[str, dict[str, list[str]]] = {}
    for line in ledger.read_text().splitlines():
        request_id, actor, result = line.split()
        seen.setdefault(request_id, {}).setdefault(actor, []).append(result)
    return seen


async def crash_problems(path: Path, ledger: Path, n: int) -> list[str]:
    """Everything wrong with the store after the run; empty when nothing was lost or doubled."""
    problems = []
    with sqlite3.connect(path) as conn:
        events = Counter(
            (rid, event)
            for rid, event in conn.execute(
                "SELECT request_id, event FROM audit WHERE request_id IS NOT NULL"
            )
        )
        stored_ids = {rid for (rid,) in conn.execute("SELECT id FROM requests")}
    answers = read_ledger(ledger)
    expected_ids = set(crash_ids(n))
    if stored_ids - expected_ids:
        problems.append(f"rows outside the fixed set: {sorted(stored_ids - expected_ids)[:5]}")
    async with SQLiteStore(path) as store:
        for request_id in sorted(expected_ids):
            request = await store.get_request(request_id)
            if request is None:
                problems.append(f"{request_id}: missing")
                continue
            problems += request_problems(request, events, answers.get(request_id, {}))
        verification = await store.verify_audit()
        integrity = await store.integrity_check()
    if not verification.ok:
        problems.append(f"audit chain: {verification}")
    if integrity != "ok":
        problems.append(f"integrity_check: {integrity}")
    return problems


def request_problems(
    request: ApprovalRequest, events: Counter[tuple[str, str]], answers: dict[str, list[str]]
) -> list[str]:
    rid = request.id
    terminal = {
        e: events[(rid, e)] for e in ("resolved", "expired", "cancelled") if events[(rid, e)]
    }
    problems = []
    if events[(rid, "created")] != 1:
        problems.append(f"{rid}: {events[(rid, 'created')]} created events")
    if terminal != {("expired" if is_short(rid) else "resolved"): 1}:
        problems.append(f"{rid}: status {request.status}, terminal audit events {terminal}")
    if is_short(rid):
        return problems
    winners = [actor for actor, results in answers.items() if {"won", "same"} & set(results)]
    if sum(results.count("won") for results in answers.values()) > 1:
        problems.append(f"{rid}: more than one decision won: {answers}")
    if [d.approver for d in request.decisions] != [request.calls[0].resolved_by]:
        problems.append(f"{rid}: stored decisions {[d.approver for d in request.decisions]}")
    if len(winners) > 1 or (winners and winners[0] != request.calls[0].resolved_by):
        problems.append(f"{rid}: ledger winners {winners}, stored {request.calls[0].resolved_by}")
    expected = {"approve": "approved", "reject": "rejected"}[
        ACTORS[request.calls[0].resolved_by or "A"]
    ]
    if request.calls[0].resolution != expected or events[(rid, "decided")] != 1:
        problems.append(f"{rid}: {request.calls[0].resolution}, {events[(rid, 'decided')]} decided")
    return problems


@pytest.mark.slow
async def test_sigkilled_worker_loses_and_doubles_nothing(tmp_path: Path) -> None:
    path, ledger = tmp_path / "crash.db", tmp_path / "ledger.txt"
    started = time.monotonic()
    kills = await asyncio.to_thread(run_with_kills, path, ledger, N_REQUESTS, KILLS)
    async with SQLiteStore(path) as store:
        await sweep_until_nothing_is_due(store)
        statuses = Counter(r.status for r in await store.list_requests(limit=10 * N_REQUESTS))
    assert await crash_problems(path, ledger, N_REQUESTS) == []
    assert statuses == {"resolved": N_REQUESTS * 9 // 10, "expired": N_REQUESTS // 10}
    # a fast machine may finish before every planned kill lands; a few mid-load is enough
    assert kills >= 3, f"only {kills} kills landed in {time.monotonic() - started:.1f}s"


@pytest.mark.slow
async def test_crash_checker_catches_last_writer_wins(tmp_path: Path) -> None:
    """Negative control: a store that lets the last writer win must fail the same checks."""
    path, ledger = tmp_path / "lww.db", tmp_path / "ledger.txt"
    n = 50
    worker = await asyncio.to_thread(start_worker, path, ledger, n, "lww")
    out, _ = await asyncio.to_thread(worker.communicate, None, 60)
    assert worker.returncode == 0 and "done" in out
    async with SQLiteStore(path) as store:
        await sweep_until_nothing_is_due(store)
    problems = await crash_problems(path, ledger, n)
    doubled = [p for p in problems if "'resolved': 2" in p]
    assert len(doubled) == n - n // 10
    assert any("more than one decision won" in p for p in problems)
