"""``@gate.guard`` overhead on an allowed call: guarded vs bare function, sync and async, and
a function taking Python values (``datetime``, ``Decimal``) whose JSON form the limits stage
proves faithful on every call (round trip through the signature).

The gate uses a real :class:`SQLiteStore` (``synchronous=FULL``) in a temporary directory.
Each allowed call queues an ``allowed`` audit event for the store's batched writer, which
commits them on its own thread while the benchmark runs (that CPU and GIL time is part of
what the guarded calls cost). After timing, the queue is flushed outside the timed region
and the ``allowed`` rows in the file are counted, proving every guarded call was audited.

GC stays on here: the queued audit events are real allocations an application would collect.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from benchmarks import fixtures
from benchmarks.measure import Row, Target, fmt, interleaved_batches, judge, mark, summarize
from signoff import Gate
from signoff.gate.context import use_context
from signoff.store import Store

TARGET_US = 25.0
TARGETS = [
    Target("sync.overhead_us", "<=", TARGET_US, "µs/call"),
    Target("async.overhead_us", "<=", TARGET_US, "µs/call"),
    Target("typed.overhead_us", "<=", TARGET_US, "µs/call"),
]
WHEN = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
PRICE = Decimal("101.25")


def get_price(symbol: str, currency: str = "USD") -> float:
    return 101.25


async def aget_price(symbol: str, currency: str = "USD") -> float:
    return 101.25


def get_price_typed(symbol: str, at: datetime, limit: Decimal) -> float:
    return 101.25


def _typed_batch(fn: Callable[..., float], n: int) -> Callable[[], None]:
    def run_batch() -> None:
        for _ in range(n):
            fn(symbol="MSFT", at=WHEN, limit=PRICE)

    return run_batch


def _sync_batch(fn: Callable[..., float], n: int) -> Callable[[], None]:
    def run_batch() -> None:
        for _ in range(n):
            fn(symbol="MSFT", currency="USD")

    return run_batch


async def _async_batches(
    guarded: Callable[..., Awaitable[float]],
    bare: Callable[..., Awaitable[float]],
    *,
    per_batch: int,
    batches: int,
    warmup: int,
) -> dict[str, list[float]]:
    """Interleaved batches inside one running event loop; µs per call per batch."""

    async def batch(fn: Callable[..., Awaitable[float]]) -> float:
        start = time.perf_counter_ns()
        for _ in range(per_batch):
            await fn(symbol="MSFT", currency="USD")
        return (time.perf_counter_ns() - start) / 1000.0 / per_batch

    for _ in range(warmup):
        await batch(guarded)
        await batch(bare)
    out: dict[str, list[float]] = {"guarded": [], "bare": []}
    for _ in range(batches):
        out["guarded"].append(await batch(guarded))
        out["bare"].append(await batch(bare))
    return out


def _summary(timings: dict[str, list[float]]) -> dict[str, Any]:
    guarded = summarize(timings["guarded"])
    bare = summarize(timings["bare"])
    diffs = [g - b for g, b in zip(timings["guarded"], timings["bare"], strict=True)]
    return {
        "guarded_us": guarded,
        "bare_us": bare,
        "overhead_us": round(float(guarded["median"]) - float(bare["median"]), 3),
        # The mean includes the batches during which the audit writer thread held the GIL:
        # the amortised cost of writing the audit rows, which the median leaves out.
        "overhead_mean_us": round(float(guarded["mean"]) - float(bare["mean"]), 3),
        "overhead_per_batch_pair_us": summarize(diffs),
    }


def _audit_rows(db: Path, tool: str) -> int:
    conn = sqlite3.connect(db)
    try:
        row = conn.execute(
            "SELECT count(*) FROM audit WHERE event = 'allowed' AND tool = ?", (tool,)
        ).fetchone()
        return int(row[0])
    finally:
        conn.close()


def _flushed_cpu_us(store: Store, started_cpu: float, calls: int) -> float:
    """Process CPU (every thread) per call since ``started_cpu``, after flushing the audit
    queue: the call itself plus its share of the writer's hashing, encoding and commits."""
    asyncio.run(store.flush_audit())
    return round((time.process_time() - started_cpu) * 1e6 / calls, 2)


def run(quick: bool) -> dict[str, Any]:
    per_batch = 100
    batches = 60 if quick else 600
    warmup = 5 if quick else 30
    with tempfile.TemporaryDirectory(prefix="signoff-bench-guard-") as tmp:
        store = fixtures.make_store("sqlite", Path(tmp))
        db = Path(store.url.removeprefix("sqlite:///"))
        gate = Gate(fixtures.policy(), store)
        gate.start()  # opens the store, so its batched audit writer runs during the timing
        guarded = gate.guard(get_price)
        aguarded = gate.guard(aget_price, name="get_price_async")
        tguarded = gate.guard(get_price_typed)
        sync_calls = 1 + (batches + warmup) * per_batch
        async_calls = (batches + warmup) * per_batch
        typed_calls = (batches + warmup) * per_batch
        with use_context(fixtures.agent_context(gate.policy)):
            if guarded(symbol="MSFT") != get_price(symbol="MSFT"):
                raise AssertionError("the guarded function returned something else")
            cpu = time.process_time()
            sync_t = interleaved_batches(
                {
                    "guarded": _sync_batch(guarded, per_batch),
                    "bare": _sync_batch(get_price, per_batch),
                },
                calls_per_batch=per_batch,
                batches=batches,
                warmup_batches=warmup,
            )
            sync_cpu = _flushed_cpu_us(store, cpu, sync_calls)
            cpu = time.process_time()
            async_t = asyncio.run(
                _async_batches(
                    aguarded, aget_price, per_batch=per_batch, batches=batches, warmup=warmup
                )
            )
            async_cpu = _flushed_cpu_us(store, cpu, async_calls)
            cpu = time.process_time()
            typed_t = interleaved_batches(
                {
                    "guarded": _typed_batch(tguarded, per_batch),
                    "bare": _typed_batch(get_price_typed, per_batch),
                },
                calls_per_batch=per_batch,
                batches=batches,
                warmup_batches=warmup,
            )
            typed_cpu = _flushed_cpu_us(store, cpu, typed_calls)
        stats = store.stats()
        gate.close()
        audited = {
            "get_price": _audit_rows(db, "get_price"),
            "get_price_async": _audit_rows(db, "get_price_async"),
            "get_price_typed": _audit_rows(db, "get_price_typed"),
        }
    expected = {
        "get_price": sync_calls,
        "get_price_async": async_calls,
        "get_price_typed": typed_calls,
    }
    if audited != expected:
        raise AssertionError(f"audit rows {audited} do not match guarded calls {expected}")
    result: dict[str, Any] = {
        "method": (
            f"median over interleaved batches of {per_batch} calls (µs/call), guarded vs bare, "
            "SQLiteStore synchronous=FULL, GC on; overhead = median(guarded) - median(bare); "
            "cpu_us_per_guarded_call = process CPU of all threads incl. the audit flush / calls"
        ),
        "sync": {**_summary(sync_t), "cpu_us_per_guarded_call": sync_cpu},
        "async": {**_summary(async_t), "cpu_us_per_guarded_call": async_cpu},
        "typed": {**_summary(typed_t), "cpu_us_per_guarded_call": typed_cpu},
        "guarded_calls": expected,
        "allowed_audit_rows_written": audited,
        "audit_batches": stats.get("audit_batches"),
    }
    return judge(result, TARGETS)


def rows(result: dict[str, Any]) -> list[Row]:
    out = []
    labels = {"sync": "sync", "async": "async", "typed": "sync, datetime + Decimal args"}
    for variant, target in zip(("sync", "async", "typed"), TARGETS, strict=True):
        if variant not in result:
            continue
        r = result[variant]
        out.append(
            Row(
                f"guard: overhead on an allowed call ({labels[variant]})",
                f"{fmt(r['overhead_us'], 'µs')}",
                f"≤ {TARGET_US:g} µs: {mark(result['targets_met'][target.describe()])}",
                f"guarded p99 {fmt(r['guarded_us']['p99'], 'µs')}, mean "
                f"{fmt(r['guarded_us']['mean'], 'µs')}; CPU incl. audit writing "
                f"{fmt(r['cpu_us_per_guarded_call'], 'µs')}/call",
            )
        )
    rows_written = sum(result["allowed_audit_rows_written"].values())
    out.append(
        Row(
            "guard: allowed audit rows written",
            f"{rows_written:,}",
            note=f"= guarded calls, in {result['audit_batches']} group commits",
        )
    )
    return out
