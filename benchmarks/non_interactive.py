"""Non-interactive runs: the shell allow-list check, and a whole allow-listed call.

* **check**: ``check_command`` on three commands with the deepagents preset's allow-list, µs
  per call in interleaved batches: a typical one (``git status --short && ls -la | head -5``),
  a long one (64 allowed segments, about 1 KiB), and a refused one (``$(`` inside). Target:
  the typical command ≤ 50 µs — nothing next to running a process.
* **guarded call**: ``@gate.guard`` of ``execute`` with an allow-listed command in a
  non-interactive gate on a SQLite file — the request is stored and audited, resolved by the
  ``non-interactive`` actor, then claimed and recorded exactly once (four transactions) — ms
  per call; the same gate's allowed call (``ls``, policy ``allow``) beside it for scale.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.measure import Row, Target, fmt, gc_paused, interleaved_batches, judge, summarize
from signoff import Gate, Policy
from signoff.checks.shell import AllowList, check_command
from signoff.cli.main import Preset, preset_text

CHECK_TARGET = Target("check.typical.median", "<=", 50.0, "µs")
COMMANDS = {
    "typical": "git status --short && ls -la | head -5",
    "long": " && ".join(f"ls -la dir{i}" for i in range(64)),
    "refused": 'ls "$(rm -rf ~)"',
}


def _gate(tmp: Path) -> Gate:
    config = tmp / "signoff.yaml"
    config.write_text(preset_text(Preset.deepagents))
    gate = Gate(Policy.load(config), interactive=False)
    gate.start()
    return gate


def measure_check(allow: AllowList, quick: bool) -> dict[str, Any]:
    per_batch = 200

    def batch(command: str) -> Callable[[], None]:
        def run() -> None:
            for _ in range(per_batch):
                check_command(command, allow)

        return run

    for name, command in COMMANDS.items():
        if check_command(command, allow).allowed != (name != "refused"):
            raise AssertionError(f"{name}: unexpected answer for {command!r}")
    with gc_paused():
        timings = interleaved_batches(
            {name: batch(command) for name, command in COMMANDS.items()},
            calls_per_batch=per_batch,
            batches=40 if quick else 300,
            warmup_batches=5 if quick else 20,
        )
    return {name: summarize(values) for name, values in timings.items()}


def measure_guarded(gate: Gate, quick: bool) -> dict[str, Any]:
    calls = 50 if quick else 400

    @gate.guard
    def execute(command: str) -> str:
        return command

    @gate.guard
    def ls(path: str) -> str:
        return path

    out: dict[str, list[float]] = {"allow_listed_ms": [], "allowed_ms": []}
    for i in range(calls + 10):
        start = time.perf_counter()
        execute(command=f"ls -la dir{i}")
        middle = time.perf_counter()
        ls(path=f"dir{i}")
        end = time.perf_counter()
        if i >= 10:  # warm-up
            out["allow_listed_ms"].append((middle - start) * 1000)
            out["allowed_ms"].append((end - middle) * 1000)
    return {name: summarize(values) for name, values in out.items()}


def run(quick: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="signoff-bench-") as tmp:
        gate = _gate(Path(tmp))
        try:
            result: dict[str, Any] = {
                "check": measure_check(gate.settings.non_interactive.commands, quick),
                "guarded": measure_guarded(gate, quick),
            }
        finally:
            gate.close()
    result["method"] = (
        "check_command µs/call in interleaved batches of 200 (deepagents preset allow-list); "
        "@gate.guard ms/call of an allow-listed execute in a non-interactive gate on SQLite "
        "(stored, resolved, claimed, recorded) beside an allowed call"
    )
    return judge(result, [CHECK_TARGET])


def rows(result: dict[str, Any]) -> list[Row]:
    check, guarded = result["check"], result["guarded"]
    ok = result["targets_met"][CHECK_TARGET.describe()]
    return [
        Row(
            "non-interactive: allow-list check, typical command",
            fmt(check["typical"]["median"], "µs"),
            f"≤ 50 µs: {'yes' if ok else 'NO'}",
            "`git status --short && ls -la | head -5`",
        ),
        Row(
            "non-interactive: allow-list check, 64 segments",
            fmt(check["long"]["median"], "µs"),
            note="about 1 KiB",
        ),
        Row("non-interactive: allow-list check, refused", fmt(check["refused"]["median"], "µs")),
        Row(
            "non-interactive: guarded allow-listed call (SQLite)",
            f"median {fmt(guarded['allow_listed_ms']['median'], 'ms')}, "
            f"p99 {fmt(guarded['allow_listed_ms']['p99'], 'ms')}",
            note=f"an allowed call: {fmt(guarded['allowed_ms']['median'], 'ms', 3)}",
        ),
    ]
