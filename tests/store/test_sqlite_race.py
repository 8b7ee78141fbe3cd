"""First valid decision wins under real concurrency: four processes race on one SQLite file."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from signoff.store import SQLiteStore
from tests.store.factories import created_events, make_request, subprocess_env
from tests.store.race_worker import race_ids

N_REQUESTS = 300
N_WORKERS = 4


async def create_race_set(path: Path) -> None:
    async with SQLiteStore(path) as store:
        for request_id in race_ids(N_REQUESTS):
            request = make_request(request_id=request_id, thread=request_id)
            await store.create_request(request, created_events(request))


def run_workers(path: Path) -> dict[int, dict[str, list[str]]]:
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.store.race_worker", str(path), str(k), str(N_REQUESTS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=subprocess_env(),
        )
        for k in range(N_WORKERS)
    ]
    for worker in workers:  # everyone is connected before anyone decides
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    results = {}
    for k, worker in enumerate(workers):
        out, _ = worker.communicate(timeout=120)
        assert worker.returncode == 0
        results[k] = json.loads(out)
    return results


def audit_counts(path: Path) -> Counter[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT request_id, event FROM audit WHERE request_id IS NOT NULL")
        return Counter((rid, event) for rid, event in rows)


@pytest.mark.slow
async def test_four_processes_racing_leave_exactly_one_outcome_per_request(
    tmp_path: Path,
) -> None:
    path = tmp_path / "race.db"
    await create_race_set(path)
    results = run_workers(path)
    counts = audit_counts(path)
    problems = []
    async with SQLiteStore(path) as store:
        for request_id in race_ids(N_REQUESTS):
            clicks = {k: results[k][request_id] for k in range(N_WORKERS)}
            winners = [k for k, c in clicks.items() if c == ["won", "same"]]
            losers_ok = all(
                c == ["conflict", "conflict"] for k, c in clicks.items() if k not in winners
            )
            request = await store.get_request(request_id)
            assert request is not None
            if len(winners) != 1 or not losers_ok:
                problems.append(f"{request_id}: clicks {clicks}")
                continue
            k = winners[0]
            expected = "approved" if k % 2 == 0 else "rejected"
            if [d.approver for d in request.decisions] != [f"user{k}"]:
                problems.append(f"{request_id}: stored decisions {request.decisions}")
            if (request.status, request.calls[0].resolution) != ("resolved", expected):
                problems.append(f"{request_id}: stored {request.status}/{request.calls[0]}")
            for event in ("created", "decided", "resolved"):
                if counts[(request_id, event)] != 1:
                    problems.append(f"{request_id}: {counts[(request_id, event)]} {event} events")
        verification = await store.verify_audit()
        integrity = await store.integrity_check()
    assert problems == []
    assert verification.ok, verification
    assert integrity == "ok"
    assert sum(1 for r in results.values() for c in r.values() if c[0] == "won") == N_REQUESTS
