"""``python -m benchmarks [--quick] [--only NAME ...]``: run, print a table, write JSON.

A new benchmark (server, langchain, mcp, postgres…) is one module with
``run(quick: bool) -> dict`` and ``rows(result) -> list[Row]``, added to :data:`BENCHMARKS`.
A result dict should hold its numbers, a ``method`` line, and ``target``/``meets_target``
(see :func:`benchmarks.measure.judge`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sqlite3
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks import (
    agent_sdks,
    channels,
    cycles,
    grants,
    guard,
    inquiry_fallback,
    instructions,
    intent,
    metrics,
    non_interactive,
    policy,
    resume,
    server,
)
from benchmarks import langchain as langchain_agents
from benchmarks import mcp as mcp_proxy
from benchmarks import postgres as postgres_replicas
from benchmarks import regex as policy_regex
from benchmarks.measure import Row, load_average


@dataclass(frozen=True, slots=True)
class Benchmark:
    name: str
    summary: str
    run: Callable[[bool], dict[str, Any]]
    rows: Callable[[dict[str, Any]], list[Row]]


def _entry(name: str, module: ModuleType, summary: str) -> Benchmark:
    return Benchmark(name, summary, module.run, module.rows)


BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in (
        _entry("policy", policy, "Policy.evaluate µs/call vs a hand-written if chain"),
        _entry("regex", policy_regex, "matches on RE2: worst patterns on 256 KiB, vs Python re"),
        _entry("guard", guard, "@gate.guard overhead on an allowed call, sync and async"),
        _entry("resume", resume, "decide -> waiting agent resumes, in-process and cross-process"),
        _entry("cycles", cycles, "create -> decide -> resume -> run cycles/s"),
        _entry(
            "instructions",
            instructions,
            "instructions per approval cycle under callgrind (load-independent)",
        ),
        _entry("mcp", mcp_proxy, "MCP proxy: added latency of an allowed tools/call"),
        _entry("server", server, "HTTP server: resume latency, 1,000 long-polls, cycles/s"),
        _entry(
            "langchain",
            langchain_agents,
            "SignoffMiddleware vs LangChain's HITL middleware: ungated step, approve cycle",
        ),
        _entry(
            "agent-sdks",
            agent_sdks,
            "OpenAI Agents SDK and Pydantic AI adapters vs each SDK alone: allowed call, cycle",
        ),
        _entry(
            "postgres",
            postgres_replicas,
            "PostgreSQL replicas: statement costs, wake across replicas, cycles/s, sweeper",
        ),
        _entry(
            "channels",
            channels,
            "Channels: submit -> first notification received; forged callbacks accepted",
        ),
        _entry("metrics", metrics, "/metrics scrape with 10,000 pending requests"),
        _entry(
            "intent",
            intent,
            "Intent judges: judged call vs the judge alone (5 ms loopback), cache hit",
        ),
        _entry(
            "inquiry_fallback",
            inquiry_fallback,
            "Inquiries: create with a fallback judge vs without; fallback answer vs human",
        ),
        _entry(
            "grants",
            grants,
            "Grants: check with 1,000 active grants vs none; revocation seen by another process",
        ),
        _entry(
            "non_interactive",
            non_interactive,
            "Non-interactive runs: shell allow-list check µs; an allow-listed guarded call",
        ),
    )
}

HERE = Path(__file__).resolve().parent


def machine() -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "sqlite_version": sqlite3.sqlite_version,
        "load_average_before": load_average(),
    }


def run_one(bench: Benchmark, quick: bool) -> dict[str, Any]:
    before = load_average()
    started = time.perf_counter()
    try:
        result = bench.run(quick)
    except Exception as exc:
        traceback.print_exc()
        result = {"error": f"{type(exc).__name__}: {exc}", "meets_target": False}
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["load_average"] = {"before": before, "after": load_average()}
    result["measured_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    result["quick"] = quick
    return result


def table(results: dict[str, dict[str, Any]]) -> str:
    """A Markdown table: readable in a terminal, pasted as-is into docs/benchmarks.md."""
    lines = ["| benchmark | result | target | notes |", "| --- | --- | --- | --- |"]
    for name, result in results.items():
        if "error" in result:
            lines.append(f"| {name} | FAILED | | {result['error']} |")
            continue
        for row in BENCHMARKS[name].rows(result):
            lines.append(f"| {row.metric} | {row.value} | {row.target} | {row.note} |")
    return "\n".join(lines)


def write(path: Path, doc: dict[str, Any], merge: bool) -> None:
    """Write ``doc``; with ``merge`` keep sections of an earlier run that were not re-run."""
    if merge and path.exists():
        earlier = json.loads(path.read_text(encoding="utf-8"))
        doc["results"] = {**earlier.get("results", {}), **doc["results"]}
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small N: a smoke test (~20 s)")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help=f"run only these (repeat or comma-separate): {', '.join(BENCHMARKS)}",
    )
    parser.add_argument(
        "--output",
        type=Path,
        help="JSON file (default benchmarks/results.json, or results-quick.json with --quick); "
        "with --only, sections of an earlier run in the file are kept",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # The MCP SDK installs an INFO handler on the root logger; later sections' HTTP clients
    # would print a line per request (thousands in the metrics section).
    logging.getLogger("httpx").setLevel(logging.WARNING)
    names = [n.strip() for group in args.only for n in group.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
        return 2
    selected = [BENCHMARKS[n] for n in (names or BENCHMARKS)]
    output = args.output or HERE / ("results-quick.json" if args.quick else "results.json")

    info = machine()
    print(
        f"signoff benchmarks{' (quick)' if args.quick else ''}: {info['cpu_count']} CPUs, "
        f"Python {info['python']}, SQLite {info['sqlite_version']}, "
        f"load average {info['load_average_before']}",
        flush=True,
    )
    results: dict[str, dict[str, Any]] = {}
    for bench in selected:
        print(f"- {bench.name}: {bench.summary} …", end=" ", flush=True)
        results[bench.name] = run_one(bench, args.quick)
        print(f"{results[bench.name]['seconds']} s", flush=True)
    info["load_average_after"] = load_average()

    doc = {
        "machine": info,
        "results": results,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    write(output, doc, merge=bool(names))
    print()
    print(table(results))
    print(f"\nload average after: {info['load_average_after']}; wrote {output}")
    failed = [n for n, r in results.items() if "error" in r]
    missed = [n for n, r in results.items() if "error" not in r and not r.get("meets_target")]
    if missed:
        print(f"targets missed: {', '.join(missed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
