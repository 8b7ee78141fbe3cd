"""Timing and statistics shared by every benchmark.

Why batches: one ``Policy.evaluate`` takes a few microseconds, close to the cost and jitter of
reading the clock, so hot-path benchmarks time batches of calls and report the per-call time
of each batch; the median over batches is robust to the scheduler's hiccups on a shared
2-core machine, and the p99 over batches shows how bad the hiccups were. Variants compared
with each other (signoff vs a baseline) run in *interleaved* batches, so a burst of outside
load hits both and their ratio stays meaningful.
"""

from __future__ import annotations

import gc
import math
import os
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

Op = Literal["<=", ">="]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between closest ranks."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(values: Sequence[float], digits: int = 3) -> dict[str, float | int]:
    """n, median, p99, min, max and mean of ``values`` (in whatever unit they are)."""
    return {
        "n": len(values),
        "median": round(statistics.median(values), digits),
        "p99": round(percentile(values, 99), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
        "mean": round(statistics.fmean(values), digits),
    }


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic GC inside the block (restoring its previous state)."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def interleaved_batches(
    variants: Mapping[str, Callable[[], None]],
    *,
    calls_per_batch: int,
    batches: int,
    warmup_batches: int,
) -> dict[str, list[float]]:
    """Run each variant's batch function in turn, ``batches`` times; µs per call per batch.

    Each callable performs ``calls_per_batch`` calls. The first ``warmup_batches`` rounds
    are run and discarded (caches, specialisation of the interpreter's adaptive opcodes).
    """
    for _ in range(warmup_batches):
        for run_batch in variants.values():
            run_batch()
    out: dict[str, list[float]] = {name: [] for name in variants}
    clock = time.perf_counter_ns
    for _ in range(batches):
        for name, run_batch in variants.items():
            start = clock()
            run_batch()
            out[name].append((clock() - start) / 1000.0 / calls_per_batch)
    return out


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, where the OS has them."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


@dataclass(frozen=True, slots=True)
class Target:
    """A goal for one number in a result: ``metric`` (a dotted path into it) op ``value``."""

    metric: str
    op: Op
    value: float
    unit: str

    def describe(self) -> str:
        return f"{self.metric} {self.op} {self.value:g} {self.unit}"

    def met_by(self, result: Mapping[str, Any]) -> bool:
        actual = float(lookup(result, self.metric))
        return actual <= self.value if self.op == "<=" else actual >= self.value

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "op": self.op, "value": self.value, "unit": self.unit}


def lookup(data: Mapping[str, Any], dotted: str) -> Any:
    """``lookup(d, "a.b")`` is ``d["a"]["b"]``."""
    value: Any = data
    for part in dotted.split("."):
        value = value[part]
    return value


def judge(result: dict[str, Any], targets: Sequence[Target]) -> dict[str, Any]:
    """Add ``target`` and ``meets_target`` (every target met) to ``result``; returns it."""
    verdicts = {t.describe(): t.met_by(result) for t in targets}
    result["target"] = [t.to_json() for t in targets]
    result["targets_met"] = verdicts
    result["meets_target"] = all(verdicts.values())
    return result


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the printed results table."""

    metric: str
    value: str
    target: str = ""
    note: str = ""

    def to_json(self) -> dict[str, str]:
        return {
            "metric": self.metric,
            "value": self.value,
            "target": self.target,
            "note": self.note,
        }


def fmt(value: float, unit: str, digits: int = 2) -> str:
    """``fmt(3.14159, "µs")`` -> ``"3.14 µs"``; large values get thousands separators."""
    if abs(value) >= 1000:
        return f"{value:,.0f} {unit}"
    return f"{value:.{digits}f} {unit}"


def mark(ok: bool) -> str:
    return "yes" if ok else "NO"
