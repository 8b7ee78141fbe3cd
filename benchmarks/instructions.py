"""Instructions per approval cycle under callgrind: a measure the machine's load does not move.

The cycles benchmark's CPU time per cycle moves ±10–15 % between identical runs on these
shared 2-vCPU machines (``docs/benchmarks.md``, "Noise"), so a change worth 5 % cannot be
seen in one run. Valgrind's callgrind counts the instructions the process executes instead:
the same code gives the same count within ~3 % (what moves it is how the writes happen to
group into COMMITs). Each configuration runs the cycles benchmark's ``_measure`` twice in a
fresh process under ``valgrind --tool=callgrind`` — with ``SMALL`` and ``LARGE`` cycles — and
the difference divided by ``LARGE - SMALL`` is the cost of one cycle, start-up and warm-up
cancelled out. ``PYTHONHASHSEED=0`` keeps string hashing (and with it dict and set layouts)
the same from run to run.

Counts user-space instructions of every thread (valgrind runs them one at a time), not
system calls' time or the cost of waiting; read it next to the cycles benchmark's CPU per
cycle. Skipped, saying so, when valgrind is not installed (``apt-get install valgrind``).

Run on its own: ``python -m benchmarks --only instructions``; a child run:
``python -m benchmarks.instructions KIND AGENTS CYCLES``.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import fixtures
from benchmarks.measure import Row, fmt, judge

CONFIGS: tuple[tuple[str, str, int], ...] = (
    ("memory", "MemoryStore", 8),
    ("sqlite", "SQLite FULL", 8),
)
SMALL, LARGE = 96, 496
QUICK_SMALL, QUICK_LARGE = 24, 124
WARMUP = 20
_TOTALS = re.compile(r"^totals:\s*(\d+)", re.MULTILINE)


def _child(kind: str, agents: int, cycles: int) -> None:
    from benchmarks.cycles import _measure

    with tempfile.TemporaryDirectory(prefix="signoff-bench-instr-") as tmp:
        store = fixtures.make_store(kind, Path(tmp), synchronous="FULL")
        asyncio.run(_measure(store, agents, cycles, WARMUP))


def count(valgrind: str, kind: str, agents: int, cycles: int) -> list[int]:
    """Instructions callgrind counted for a whole child run of ``cycles`` cycles, per thread
    in the order the threads started (the event loop's first)."""
    with tempfile.TemporaryDirectory(prefix="signoff-bench-callgrind-") as tmp:
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(
            [
                valgrind,
                "--tool=callgrind",
                "--separate-threads=yes",
                f"--callgrind-out-file={tmp}/callgrind.out",
                sys.executable,
                "-m",
                "benchmarks.instructions",
                kind,
                str(agents),
                str(cycles),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        threads = [
            int(found.group(1))
            for out in sorted(Path(tmp).glob("callgrind.out-*"))
            if (found := _TOTALS.search(out.read_text(errors="replace"))) is not None
        ]
    if done.returncode != 0 or not threads:
        raise RuntimeError(
            f"callgrind run of {kind} ({agents} agents, {cycles} cycles) failed "
            f"(exit {done.returncode}): {done.stderr[-800:]}"
        )
    return threads


def run(quick: bool) -> dict[str, Any]:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        # no target of its own: a skip misses nothing
        return judge({"skipped": "valgrind is not installed (apt-get install valgrind)"}, [])
    small, large = (QUICK_SMALL, QUICK_LARGE) if quick else (SMALL, LARGE)
    result: dict[str, Any] = {
        "method": (
            f"callgrind instruction count of a run of {large} cycles minus one of {small} "
            f"(fresh processes, PYTHONHASHSEED=0), divided by {large - small}: one cycle's "
            "instructions, all threads, user space; same cycle as the cycles benchmark"
        ),
        "cycles": {"small": small, "large": large},
    }
    for kind, _label, agents in CONFIGS:
        a = count(valgrind, kind, agents, small)
        b = count(valgrind, kind, agents, large)
        per_thread = [(y - x) / (large - small) for x, y in zip(a, b, strict=False)]
        loop, others = per_thread[0], sorted(per_thread[1:], reverse=True)
        result[f"{kind}_{agents}"] = {
            "instructions_per_cycle": round((sum(b) - sum(a)) / (large - small)),
            "event_loop": round(loop),
            # SQLite's writer thread; none on the MemoryStore, whose writes run on the loop
            "writer": round(others[0]) if kind == "sqlite" and others else 0,
            # the gate's portal loop (grants refresh, sweeper) and the store's reader and
            # watcher: mostly timer-driven work, which valgrind's ~50x slowdown makes ~50x
            # as frequent per cycle as in a real run
            "other_threads": round(sum(others[1:] if kind == "sqlite" else others)),
            "threads": len(per_thread),
        }
    return judge(result, [])  # informational: the targets are the cycles benchmark's


def rows(result: dict[str, Any]) -> list[Row]:
    if "skipped" in result:
        return [Row("instructions per cycle (callgrind)", "skipped", note=result["skipped"])]
    out = []
    for kind, label, agents in CONFIGS:
        r = result[f"{kind}_{agents}"]
        split = f"event loop {fmt(r['event_loop'] / 1e6, 'M', 2)}"
        if r["writer"]:
            split += f", writer {fmt(r['writer'] / 1e6, 'M', 2)}"
        split += f", other threads {fmt(r['other_threads'] / 1e6, 'M', 2)} (timers: inflated)"
        out.append(
            Row(
                f"instructions per cycle, {label}, {agents} agents",
                fmt(r["instructions_per_cycle"] / 1e6, "M", 2),
                note=f"callgrind, all threads: {split}; same code within ~3 %",
            )
        )
    return out


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
