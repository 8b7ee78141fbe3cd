"""Intent checks: what a judge costs the gate (issue #16).

A loopback OpenAI-compatible server (another process) answers every chat completion after
5 ms. Measured in one event loop, interleaved round by round:

- *judge alone*: the ``kind: openai`` judge's own ``answer()`` (the SDK's HTTP round trip
  plus the 5 ms): the judge latency;
- *judged call, cache miss*: ``gate.acheck`` of a tool with ``intent:`` (new arguments each
  time): target ≤ judge latency + 1 ms;
- *judged call, cache hit*: the same call again, minus ``gate.acheck`` of a tool without
  ``intent:``: target ≤ 20 µs;
- *no intent*: ``gate.check`` (sync) of a tool without ``intent:`` in a gate with judges
  configured vs one without a ``judges:`` section: the fast path unchanged (ratio ≈ 1).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from benchmarks.measure import Row, Target, fmt, gc_paused, interleaved_batches, judge, mark
from signoff import Gate, Policy, ToolCall
from signoff.judges.base import JudgeRequest
from signoff.store import MemoryStore

DELAY_MS = 5.0
TARGETS = [
    Target("miss.overhead_ms", "<=", 1.0, "ms"),
    Target("hit.overhead_us", "<=", 20.0, "us"),
    Target("plain.ratio", "<=", 1.1, "x"),
]

POLICY = """
version: 1
defaults: {unknown_tool: allow}
judges:
  fast:
    kind: openai
    base_url: "http://127.0.0.1:PORT/v1"
    model: bench-judge
    timeout: 5s
tools:
  judged:
    default: allow
    intent: {judge: fast}
  plain:
    default: allow
"""

PLAIN_POLICY = """
version: 1
defaults: {unknown_tool: allow}
tools:
  plain:
    default: allow
"""


def _start_server() -> tuple[subprocess.Popen[bytes], int]:
    port_file = Path(tempfile.mkdtemp()) / "port"
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks._judge_server", str(port_file), str(DELAY_MS)],
        cwd=Path(__file__).resolve().parents[1],
    )
    deadline = time.monotonic() + 30
    while not port_file.exists() or not port_file.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the judge server did not start")
        time.sleep(0.02)
    return proc, int(port_file.read_text())


def run(quick: bool) -> dict[str, Any]:
    proc, port = _start_server()
    os.environ.setdefault("OPENAI_API_KEY", "bench")  # the SDK wants one; the server ignores it
    try:
        return judge(_measure(port, quick), TARGETS)
    finally:
        proc.kill()
        proc.wait(10)


def _measure(port: int, quick: bool) -> dict[str, Any]:
    rounds = 40 if quick else 300
    gate = Gate(Policy.from_yaml(textwrap.dedent(POLICY).replace("PORT", str(port))), MemoryStore())
    bare = Gate(Policy.from_yaml(textwrap.dedent(PLAIN_POLICY)), MemoryStore())
    try:
        timings = asyncio.run(_async_rounds(gate, rounds))
        plain = _plain_rounds(gate, bare, quick)
    finally:
        gate.close()
        bare.close()
    direct = statistics.median(timings["direct"])
    miss = statistics.median(timings["miss"])
    hit = statistics.median(timings["hit"])
    base = statistics.median(timings["base"])
    return {
        "method": (
            f"{rounds} interleaved rounds; loopback chat-completions server answering after "
            f"{DELAY_MS:g} ms (another process); medians; MemoryStore"
        ),
        "judge_alone_ms": round(direct, 3),
        "miss": {"median_ms": round(miss, 3), "overhead_ms": round(miss - direct, 3)},
        "hit": {
            "median_us": round(hit * 1000, 2),
            "no_intent_acheck_us": round(base * 1000, 2),
            "overhead_us": round((hit - base) * 1000, 2),
        },
        "plain": plain,
    }


async def _async_rounds(gate: Gate, rounds: int) -> dict[str, list[float]]:
    await gate.astart()
    judge_ = gate.intents.judges["fast"]
    ctx = gate.make_context("bench", user_request="show the weekly report")
    out: dict[str, list[float]] = {"direct": [], "miss": [], "hit": [], "base": []}
    hit_call = ToolCall("judged", {"week": 0})
    await gate.acheck(hit_call, ctx)  # cached from now on
    clock = time.perf_counter
    for i in range(rounds + 5):
        request = JudgeRequest("judged", {"week": i}, ctx.user_request, None)
        t0 = clock()
        await gate._on_portal(judge_.answer(request))  # where the gate runs it
        t1 = clock()
        await gate.acheck(ToolCall("judged", {"week": 10_000 + i}), ctx)
        t2 = clock()
        for _ in range(20):
            await gate.acheck(hit_call, ctx)
        t3 = clock()
        for _ in range(20):
            await gate.acheck(ToolCall("plain", {"week": 0}), ctx)
        t4 = clock()
        if i < 5:  # warm-up
            continue
        out["direct"].append((t1 - t0) * 1000)
        out["miss"].append((t2 - t1) * 1000)
        out["hit"].append((t3 - t2) * 1000 / 20)
        out["base"].append((t4 - t3) * 1000 / 20)
    await gate.store.flush_audit()
    return out


def _plain_rounds(gate: Gate, bare: Gate, quick: bool) -> dict[str, Any]:
    call = ToolCall("plain", {"week": 1})
    ctx = gate.make_context("bench")
    calls = 200

    def batch(g: Gate) -> Any:
        def run_batch() -> None:
            for _ in range(calls):
                g.check(call, ctx)

        return run_batch

    with gc_paused():
        times = interleaved_batches(
            {"with_judges": batch(gate), "without": batch(bare)},
            calls_per_batch=calls,
            batches=10 if quick else 60,
            warmup_batches=3,
        )
    ratios = [a / b for a, b in zip(times["with_judges"], times["without"], strict=True)]
    return {
        "with_judges_us": round(statistics.median(times["with_judges"]), 3),
        "without_us": round(statistics.median(times["without"]), 3),
        "ratio": round(statistics.median(ratios), 3),
    }


def rows(result: dict[str, Any]) -> list[Row]:
    met = result["targets_met"]
    return [
        Row(
            "intent: judged call (cache miss) − judge alone",
            fmt(result["miss"]["overhead_ms"], "ms", 3),
            f"≤ 1 ms: {mark(met[TARGETS[0].describe()])}",
            f"judge alone {fmt(result['judge_alone_ms'], 'ms')} (server answers after "
            f"{DELAY_MS:g} ms); judged call {fmt(result['miss']['median_ms'], 'ms')}",
        ),
        Row(
            "intent: cache hit over a call without intent",
            fmt(result["hit"]["overhead_us"], "µs"),
            f"≤ 20 µs: {mark(met[TARGETS[1].describe()])}",
            f"acheck {fmt(result['hit']['median_us'], 'µs')} vs "
            f"{fmt(result['hit']['no_intent_acheck_us'], 'µs')} without intent",
        ),
        Row(
            "intent: gate.check without intent, judges configured / none",
            f"{result['plain']['ratio']:.3f}x",
            f"≤ 1.1x: {mark(met[TARGETS[2].describe()])}",
            f"{fmt(result['plain']['with_judges_us'], 'µs')} vs "
            f"{fmt(result['plain']['without_us'], 'µs')}",
        ),
    ]
