"""Full approval cycles per second through the gate.

One cycle: the agent submits a call that needs approval (``asubmit``: stored request), waits
for it (``await_request`` from the request just stored, as ``@guard`` does), a decider
approves it (``adecide``), the agent resumes and runs the call exactly once
(``arun_approved``: ``executing`` then ``executed`` on the ledger).
That is four writes per cycle on the store (create — which also takes the waiter's lease —,
decide, claim, finish); on SQLite the writer thread commits the writes queued together in one
transaction (group commit): ``jobs_per_cycle`` counts the writes, ``mean_group_size`` how many
shared a COMMIT.

Measured sequentially (one agent) and with several concurrent agents in one event loop, on
SQLite with ``synchronous=FULL`` (the default; the target applies here), and for context on
SQLite ``NORMAL``, the MemoryStore (the gate's own CPU cost, no disk) and, when PostgreSQL is
installed (or ``BENCH_PG_DSN`` names a database), a ``PostgresStore`` on a durable throwaway
cluster (``BENCH_CYCLES_PG=0`` skips it).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import fixtures
from benchmarks.measure import Row, Target, fmt, judge, mark, summarize
from signoff import Gate
from signoff.store import Store

TARGET = Target("sqlite_full.concurrent.cycles_per_s", ">=", 1000.0, "cycles/s")
CONCURRENT_AGENTS = 8


class Agent:
    """One agent running approval cycles; counts how often its tool really ran."""

    def __init__(self, gate: Gate, name: str) -> None:
        self.gate = gate
        self.ctx = fixtures.agent_context(gate.policy, thread=f"cycles-{name}")
        self.executed = 0
        self.cycle_ms: list[float] = []

    async def _tool(self, args: dict[str, Any]) -> str:
        self.executed += 1
        return f"deleted {args['table']} #{args['record_id']}"

    async def cycle(self, i: int) -> None:
        start = time.perf_counter_ns()
        call = fixtures.prod_delete(i)
        sub = await self.gate.asubmit([call], self.ctx)
        assert sub.request is not None
        # as @guard waits: from the request just stored (the wait's own read is the first)
        waiting = asyncio.create_task(self.gate.await_request(sub.request.id, current=sub.request))
        await asyncio.sleep(0)  # the agent starts waiting before the human answers
        await self.gate.adecide(sub.request.id, [{"type": "approve"}], approver=fixtures.APPROVER)
        req = await waiting
        result = await self.gate.arun_approved(req, call.id, self._tool)
        if not result.startswith("deleted"):
            raise AssertionError(f"unexpected tool result {result!r}")
        self.cycle_ms.append((time.perf_counter_ns() - start) / 1e6)

    async def run(self, first: int, count: int) -> None:
        for i in range(first, first + count):
            await self.cycle(i)


# the store's counters the measured window's figures are taken from (as differences: a store
# counts from its start, warm-up included)
_COUNTERS = (
    "transactions",
    "jobs",
    "writer_busy_s",
    "writer_cpu_s",
    "cache_hits",
    "cache_drops",
    "doorbell_rings",
)


def _window(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The store's figures over the measured window only (``None`` where it has none)."""
    if any(after.get(name) is None for name in _COUNTERS):
        return dict.fromkeys(
            (
                "mean_transaction_ms",
                "writer_ms_per_job",
                "writer_cpu_ms_per_job",
                "mean_group_size",
                "doc_cache_hits",
                "doc_cache_drops",
                "doorbell_rings",
                "jobs",
            )
        )
    d = {name: after[name] - before[name] for name in _COUNTERS}
    groups, jobs = d["transactions"], d["jobs"]
    return {
        # SQLite: one transaction per group commit; writer time per job is the writer
        # thread's busy time (statements, Python, COMMIT) divided by the jobs it ran
        "mean_transaction_ms": round(1000 * d["writer_busy_s"] / groups, 3) if groups else None,
        "writer_ms_per_job": round(1000 * d["writer_busy_s"] / jobs, 3) if jobs else None,
        # the writer thread's CPU time per job (no GIL or disk waits): what Python costs it
        "writer_cpu_ms_per_job": round(1000 * d["writer_cpu_s"] / jobs, 3) if jobs else None,
        "mean_group_size": round(jobs / groups, 2) if groups else None,
        # SQLite: writes that found the request's document in the store's cache (no SELECT)
        "doc_cache_hits": d["cache_hits"],
        # SQLite: whole-cache drops and doorbell datagrams sent (no other process here: ~0)
        "doc_cache_drops": d["cache_drops"],
        "doorbell_rings": d["doorbell_rings"],
        "jobs": jobs,
    }


async def _crew_run(crew: list[Agent], first: int, each: int) -> tuple[float, float, int]:
    """Every agent of ``crew`` runs ``each`` cycles at once: (seconds, CPU seconds, cycles)."""
    start = time.perf_counter()
    cpu_start = time.process_time()
    await asyncio.gather(*(a.run(first + k * each, each) for k, a in enumerate(crew)))
    return time.perf_counter() - start, time.process_time() - cpu_start, each * len(crew)


async def _measure(
    store: Store, agents: int, cycles: int, warmup: int, *, sweep_interval: float | None = None
) -> dict[str, Any]:
    """``cycles`` cycles by ``agents`` concurrent agents, after ``warmup`` cycles by the same
    agents on the same store (a fresh SQLite file's first few hundred cycles cost more: its
    WAL and pages grow to their working size; the warm-up's own rate is reported apart)."""
    gate = Gate(fixtures.policy(), store, sweep_interval=sweep_interval)
    await gate.astart()
    crew = [Agent(gate, f"a{k}") for k in range(agents)]
    each = cycles // agents
    try:
        # the warm-up's calls are numbered after the measured ones: no two alike per agent
        cold = await _crew_run(crew, each * agents, max(1, warmup // agents))
        for a in crew:
            a.cycle_ms.clear()
        warm_executed = sum(a.executed for a in crew)
        before = gate.store.stats()
        elapsed, cpu, done = await _crew_run(crew, 0, each)
        after = gate.store.stats()
    finally:
        await gate.aclose()
    executed = sum(a.executed for a in crew) - warm_executed
    if executed != done or warm_executed != cold[2]:
        raise AssertionError(f"{executed} executions for {done} approved cycles (exactly once)")
    window = _window(before, after)
    jobs = window.pop("jobs")
    return {
        "agents": agents,
        "cycles": done,
        "seconds": round(elapsed, 3),
        "cycles_per_s": round(done / elapsed, 1),
        # the whole process's CPU (every thread: event loop, writer, portal) per cycle
        "cpu_ms_per_cycle": round(cpu * 1000 / done, 3),
        "cycle_latency_ms": summarize([ms for a in crew for ms in a.cycle_ms], 3),
        "executions": executed,
        **window,
        "jobs_per_cycle": round(jobs / done, 2) if jobs is not None else None,
        # the warm-up on the fresh store (same agents): what the first cycles cost
        "warmup": {
            "cycles": cold[2],
            "cycles_per_s": round(cold[2] / cold[0], 1),
            "cpu_ms_per_cycle": round(cold[1] * 1000 / cold[2], 3),
        },
    }


def _executed_rows(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(
            conn.execute("SELECT count(*) FROM audit WHERE event = 'executed'").fetchone()[0]
        )
    finally:
        conn.close()


def raw_commit_ms(directory: Path, synchronous: str, n: int = 500) -> dict[str, float | int]:
    """One-row ``BEGIN IMMEDIATE; INSERT; COMMIT`` with plain sqlite3 in WAL mode: the floor
    under every store transaction on this disk (research §2.1 measured 0.24-0.3 ms FULL)."""
    conn = sqlite3.connect(directory / f"raw-{synchronous}.db", isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, doc TEXT NOT NULL)")
        doc = "x" * 1400  # about one stored request
        times = []
        for _ in range(n):
            start = time.perf_counter_ns()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t (doc) VALUES (?)", (doc,))
            conn.execute("COMMIT")
            times.append((time.perf_counter_ns() - start) / 1e6)
    finally:
        conn.close()
    return summarize(times, 3)


def _store_run(directory: Path, kind: str, synchronous: str, quick: bool) -> dict[str, Any]:
    # the MemoryStore does ~4x the cycles per second: ~4x the cycles, so that each run lasts
    # about as long (~1 s) and a scheduler hiccup or a GC pass weighs as little in it
    scale = 4 if kind == "memory" else 1
    sequential_n = (60 if quick else 400) * scale
    concurrent_n = (80 if quick else 800) * scale
    # a fresh SQLite file reaches its working size (WAL ~4 MiB) in its first ~400 cycles,
    # which cost ~20 % more CPU each: warm up past them, report them apart
    warmup = (8 if quick else 400) * scale
    out: dict[str, Any] = {}
    for label, agents, n in (
        ("sequential", 1, sequential_n),
        ("concurrent", CONCURRENT_AGENTS, concurrent_n),
    ):
        sub = directory / f"{kind}-{synchronous}-{label}"
        sub.mkdir()
        store = fixtures.make_store(kind, sub, synchronous=synchronous)
        out[label] = asyncio.run(_measure(store, agents, n, warmup))
        if kind == "sqlite":
            (db,) = sub.glob("*.db")
            out[label]["executed_audit_rows"] = _executed_rows(db) - out[label]["warmup"]["cycles"]
    return out


def _postgres_run(quick: bool) -> dict[str, Any]:
    """The same cycles on a ``PostgresStore`` (:mod:`benchmarks.postgres` has the cluster)."""
    from benchmarks import postgres

    if os.environ.get("BENCH_CYCLES_PG") == "0" or not postgres.available():
        return {"skipped": "PostgreSQL is not installed (BENCH_PG_DSN unset)"}
    url, stop = postgres.database()
    out: dict[str, Any] = {}
    try:
        for label, agents, n in (
            ("sequential", 1, 60 if quick else 400),
            ("concurrent", 8, 80 if quick else 800),
        ):
            store = postgres.cycles_store(url, f"bench_cycles_{label}")
            out[label] = asyncio.run(_measure(store, agents, n, 8 if quick else 400))
    finally:
        stop()
    return out


def run(quick: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="signoff-bench-cycles-") as tmp:
        directory = Path(tmp)
        result: dict[str, Any] = {
            "method": (
                "create -> wait -> decide -> resume -> arun_approved, cycles/s over the whole "
                f"run; concurrent = {CONCURRENT_AGENTS} agent tasks in one event loop"
            ),
            "sqlite_full": _store_run(directory, "sqlite", "FULL", quick),
            "sqlite_normal": _store_run(directory, "sqlite", "NORMAL", quick),
            "memory": _store_run(directory, "memory", "FULL", quick),
            "postgresql": _postgres_run(quick),
            "raw_sqlite_commit_ms": {
                "FULL": raw_commit_ms(directory, "FULL"),
                "NORMAL": raw_commit_ms(directory, "NORMAL"),
            },
            "write_transactions_per_cycle": 4,
        }
        full = result["raw_sqlite_commit_ms"]["FULL"]["median"]
        # One writer thread committing every write on its own (no group commit): this many
        # cycles/s at most if the gate's Python cost were zero.
        result["commit_floor_cycles_per_s"] = round(1000.0 / (4 * float(full)), 0)
    return judge(result, [TARGET])


def rows(result: dict[str, Any]) -> list[Row]:
    out = []
    labels = {
        "sqlite_full": "SQLite FULL",
        "sqlite_normal": "SQLite NORMAL",
        "memory": "MemoryStore",
        "postgresql": "PostgreSQL",
    }
    for key, label in labels.items():
        if "skipped" in result.get(key, {"skipped": "not run"}):
            continue
        for mode in ("sequential", "concurrent"):
            r = result[key][mode]
            target = ""
            if key == "sqlite_full" and mode == "concurrent":
                target = f"≥ 1,000/s: {mark(result['meets_target'])}"
            agents = f"{r['agents']} agents" if r["agents"] > 1 else "1 agent"
            note = (
                f"cycle p50 {fmt(r['cycle_latency_ms']['median'], 'ms')}, p99 "
                f"{fmt(r['cycle_latency_ms']['p99'], 'ms')}"
            )
            note += f"; CPU {fmt(r['cpu_ms_per_cycle'], 'ms', 3)}/cycle"
            if r.get("writer_ms_per_job") is not None:
                note += (
                    f"; writer {fmt(r['writer_ms_per_job'], 'ms', 3)}/write "
                    f"({fmt(r.get('writer_cpu_ms_per_job') or 0.0, 'ms', 3)} of it CPU), "
                    f"{r['mean_group_size']} writes per COMMIT"
                )
            if key.startswith("sqlite"):
                cold = r["warmup"]
                note += (
                    f"; the fresh file's first {cold['cycles']} cycles (warm-up, not counted): "
                    f"{fmt(cold['cycles_per_s'], '/s', 0)}, "
                    f"CPU {fmt(cold['cpu_ms_per_cycle'], 'ms', 3)}/cycle"
                )
            out.append(
                Row(f"cycles/s, {label}, {agents}", fmt(r["cycles_per_s"], "/s", 0), target, note)
            )
    raw = result["raw_sqlite_commit_ms"]
    out.append(
        Row(
            "  for scale: raw sqlite3 commit, FULL / NORMAL",
            f"{fmt(raw['FULL']['median'], 'ms', 3)} / {fmt(raw['NORMAL']['median'], 'ms', 3)}",
            note=f"a COMMIT per write (4 per cycle), one writer: ≤ "
            f"{result['commit_floor_cycles_per_s']:,.0f} cycles/s on FULL at zero Python cost; "
            "group commit shares one among the writes queued together",
        )
    )
    return out
