"""Grants (standing approvals) on the check path, and how fast a revocation travels.

* **check with 1,000 active grants**: ``gate.check`` of a call the policy sends for approval
  (``deploy``, rule ``prod-deploy``, from agent ``billing-bot``), µs/call, in interleaved
  batches on three gates over the same SQLite file's policy: no grants; 1,000 active grants
  for *other* tools (what a busy deployment looks like: the cache is indexed by tool); and
  1,000 active grants for the *same* tool and rule, each for another agent, none covering the
  call (other agents: the cache indexes by tool, rule and scope). ``audit=False`` so the writer
  thread stays out of the timing (a call that needs approval is not audited by ``check``
  anyway). Target: the same-tool median within 2× of the 0-grant median (same run).
* **revocation across processes**: a second process (its own ``Gate`` on the same SQLite
  file) runs ``gate.check`` every 2 ms and prints the wall-clock time when the answer flips.
  This process creates a grant, waits until the other process allows the call, waits a
  random 0-0.6 s (so revocations land at every phase of the other gate's 0.5 s refresh),
  then revokes; latency = the other process's first non-allow − the moment ``revoke_grant``
  was called. Target: max ≤ 1 s.
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from benchmarks.measure import Row, Target, fmt, gc_paused, interleaved_batches, judge, summarize
from signoff import CallContext, Gate, Policy, Principal, ToolCall
from signoff.model import utcnow
from signoff.model.grants import Grant
from signoff.store import SQLiteStore

RATIO_TARGET = Target("check.same_tool_ratio", "<=", 2.0, "×")
REVOKE_TARGET = Target("revocation_ms.max", "<=", 1000.0, "ms")
GRANTS = 1000

POLICY = """
version: 1
store: sqlite:///{db}
people:
  bob: {{roles: [ops]}}
grants: {{default_ttl: 1h, max_ttl: 1d}}
tools:
  deploy:
    default: require_approval
    approvers: {{roles: [ops]}}
    rules:
      - id: prod-deploy
        when: {{args.env: prod}}
        decision: require_approval
        approvers: {{roles: [ops]}}
  "tool_*":
    default: require_approval
    approvers: {{roles: [ops]}}
"""

CALL = ToolCall("deploy", {"env": "prod", "version": "1.2"})

WATCHER = """
import sys, time
from signoff import CallContext, Gate, Principal, ToolCall
gate = Gate.from_config(sys.argv[1])
gate.start()
call = ToolCall("deploy", {"env": "prod", "version": "1.2"})
ctx = CallContext(principal=Principal("erin"), agent="billing-bot", thread="t-1")
print("ready", flush=True)
allowed = False
while True:
    now = gate.check(call, ctx, audit=False).allowed
    if now != allowed:
        allowed = now
        print(("on " if now else "off ") + repr(time.time()), flush=True)
    time.sleep(0.002)
"""


def context() -> CallContext:
    return CallContext(principal=Principal("erin"), agent="billing-bot", thread="t-1")


def _grant(i: int, tool: str, agent: str) -> Grant:
    now = utcnow()
    rule = "prod-deploy" if tool == "deploy" else f"{tool}.default"
    return Grant(
        id=f"grant_bench_{tool}_{i}",
        tool=tool,
        rule=rule,
        scope="agent",
        agent=agent,
        created_at=now,
        expires_at=now.replace(year=now.year + 1),
        created_by="bob",
        reason="benchmark",
    )


async def _seed(db: Path, grants: list[Grant]) -> None:
    """Store grants straight through the store (1,000 gate.grant calls would take longer and
    time nothing of interest); each with its grant_created audit event."""
    from signoff.gate.granting import created_event

    store = SQLiteStore(db)
    await store.open()
    try:
        for grant in grants:
            await store.create_grant(grant, [created_event(grant)])
    finally:
        await store.close()


def _gate(tmp: Path, name: str, grants: list[Grant]) -> Gate:
    db = tmp / f"{name}.db"
    asyncio.run(_seed(db, grants))
    config = tmp / f"{name}.yaml"
    config.write_text(textwrap.dedent(POLICY.format(db=db)))
    gate = Gate(Policy.load(config))
    gate.start()
    if len(gate.grant_cache) != len(grants):
        raise AssertionError(f"{name}: {len(gate.grant_cache)} grants loaded, not {len(grants)}")
    return gate


def _batch(gate: Gate, per_batch: int) -> Callable[[], None]:
    ctx = context()
    check = gate.check

    def run() -> None:
        for _ in range(per_batch):
            check(CALL, ctx, audit=False)

    return run


def measure_check(tmp: Path, quick: bool) -> dict[str, Any]:
    per_batch = 200
    batches = 40 if quick else 300
    warmup = 5 if quick else 20
    other_tools = [_grant(i, f"tool_{i}", "billing-bot") for i in range(GRANTS)]
    same_tool = [_grant(i, "deploy", f"bot-{i}") for i in range(GRANTS)]
    gates = {
        "none": _gate(tmp, "none", []),
        "other_tools": _gate(tmp, "other", other_tools),
        "same_tool": _gate(tmp, "same", same_tool),
    }
    try:
        for gate in gates.values():
            verdict = gate.check(CALL, context(), audit=False)
            if not verdict.needs_approval or verdict.rule != "prod-deploy":
                raise AssertionError(f"the benchmark call should need approval: {verdict}")
        with gc_paused():
            timings = interleaved_batches(
                {name: _batch(gate, per_batch) for name, gate in gates.items()},
                calls_per_batch=per_batch,
                batches=batches,
                warmup_batches=warmup,
            )
    finally:
        for gate in gates.values():
            gate.close()
    out: dict[str, Any] = {name: summarize(values) for name, values in timings.items()}
    base = float(out["none"]["median"])
    out["same_tool_ratio"] = round(float(out["same_tool"]["median"]) / base, 2)
    out["other_tools_ratio"] = round(float(out["other_tools"]["median"]) / base, 2)
    return out


def _line(stream: IO[str], wanted: str, timeout: float = 10.0) -> float:
    """The time on the watcher's next ``wanted`` line (``on``/``off``)."""
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        text = stream.readline()
        if not text:
            raise RuntimeError("the watcher process ended")
        word, _, stamp = text.strip().partition(" ")
        if word == wanted:
            return float(stamp)
    raise TimeoutError(f"no {wanted!r} from the watcher within {timeout} s")


def measure_revocation(tmp: Path, quick: bool) -> dict[str, Any]:
    rounds = 5 if quick else 40
    db = tmp / "revoke.db"
    config = tmp / "revoke.yaml"
    config.write_text(textwrap.dedent(POLICY.format(db=db)))
    gate = Gate(Policy.load(config))
    gate.start()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    watcher = subprocess.Popen(
        [sys.executable, "-c", WATCHER, str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    latencies: list[float] = []
    seen: list[float] = []
    try:
        assert watcher.stdout is not None
        if watcher.stdout.readline().strip() != "ready":
            raise RuntimeError("the watcher process did not start")
        for _ in range(rounds):
            made_at = time.time()
            grant = gate.grant(
                tool="deploy", rule="prod-deploy", effect="allow", scope="agent",
                agent="billing-bot", created_by="bob",
            )  # fmt: skip
            seen.append((_line(watcher.stdout, "on") - made_at) * 1000)
            time.sleep(random.uniform(0.0, 0.6))
            revoked_at = time.time()
            gate.revoke_grant(grant.id, by="bob", reason="benchmark")
            latencies.append((_line(watcher.stdout, "off") - revoked_at) * 1000)
    finally:
        watcher.kill()
        watcher.wait()
        gate.close()
    return {
        "rounds": rounds,
        "revocation_ms": summarize(latencies, 1),
        "creation_seen_ms": summarize(seen, 1),
    }


def run(quick: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="signoff-bench-grants-") as tmp:
        check = measure_check(Path(tmp), quick)
        revocation = measure_revocation(Path(tmp), quick)
    result: dict[str, Any] = {
        "method": (
            f"gate.check(audit=False) of a call needing approval, median µs/call over interleaved "
            f"batches (GC paused): 0 grants vs {GRANTS} active grants on other tools vs {GRANTS} "
            "on the same tool and rule (other agents; none covers the call). Revocation: wall "
            "time from revoke_grant() in this process to the first non-allow of gate.check in "
            "a second process on the same SQLite file (polling check every 2 ms)"
        ),
        "check": check,
        **revocation,
    }
    return judge(result, [RATIO_TARGET, REVOKE_TARGET])


def rows(result: dict[str, Any]) -> list[Row]:
    check = result["check"]
    ratio_ok = result["targets_met"][RATIO_TARGET.describe()]
    revoke_ok = result["targets_met"][REVOKE_TARGET.describe()]
    rev = result["revocation_ms"]
    return [
        Row("grants: check, 0 grants", fmt(check["none"]["median"], "µs")),
        Row(
            f"grants: check, {GRANTS} grants on other tools",
            fmt(check["other_tools"]["median"], "µs"),
            note=f"{check['other_tools_ratio']}× the 0-grant time",
        ),
        Row(
            f"grants: check, {GRANTS} grants on the same tool and rule",
            fmt(check["same_tool"]["median"], "µs"),
            f"≤ 2× 0 grants: {'yes' if ratio_ok else 'NO'}",
            f"{check['same_tool_ratio']}× (1,000 grants of other agents on this tool and rule)",
        ),
        Row(
            "grants: revocation seen by another process",
            f"median {fmt(rev['median'], 'ms', 0)}, max {fmt(rev['max'], 'ms', 0)}",
            f"≤ 1 s: {'yes' if revoke_ok else 'NO'}",
            f"{result['rounds']} rounds; creation seen after median "
            f"{fmt(result['creation_seen_ms']['median'], 'ms', 0)}",
        ),
    ]
