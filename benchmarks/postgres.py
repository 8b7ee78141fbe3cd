"""The PostgreSQL store with several replicas: statement costs, wake-up across processes,
cycles/s with one and two replicas, and the sweeper with 100k pending requests.

Runs on a throwaway cluster with durable settings (fsync, ``synchronous_commit=on``) started
from the Debian packages (:mod:`tests.store.pg_cluster`), or on ``BENCH_PG_DSN``.

* **store operations**: ``create_request`` (create + audit + NOTIFY: one statement) and a
  decision through ``update_request`` (one read, then decide + audit + NOTIFY: one statement),
  timed at the store API, one at a time; plus 8 concurrent deciders over two stores, which
  measures the audit chain's one-row lock that serializes every writer.
* **wake across replicas**: an agent waits here (``store.wait``); a second process — another
  replica with its own store — decides. Start of the decide call (``monotonic_ns`` there) →
  the waiter resumes (here). Decisions at random 0-20 ms phases.
* **cycles/s**: submit → decide → resume through the Gate, 8 agents. One replica: agents and
  decider share a gate. Two: agents here, the decider in another process, every wake-up
  travelling by NOTIFY.
* **audit chain lock**: 8 connections appending audit rows through ``audit_append`` (one
  row lock serializes them) against 8 inserting into a table without a chain.
* **sweeper**: 100k pending requests not yet due (the idle sweep every replica runs every
  second: claim query + ``next_due_at``), then two sweeper processes expiring 10k due ones
  side by side (rows/s, and how many both expired: must be 0).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchmarks import fixtures
from benchmarks.measure import Row, Target, fmt, judge, mark, summarize
from signoff import Gate
from signoff.model import ApprovalRequest, Transition, utcnow
from signoff.model.resolution import apply_decisions, due_transition

ROOT = Path(__file__).resolve().parent.parent
WAKE_TARGET = Target("wake_across_replicas.wake_ms.median", "<=", 10.0, "ms")
IDLE_SWEEP_TARGET = Target("sweeper.idle_claim_ms.median", "<=", 2.0, "ms")
AGENTS = 8


def _store(url: str, schema: str, **kw: Any) -> Any:
    from signoff.store.postgres import PostgresStore

    return PostgresStore(url, schema=schema, pool_max=12, **kw)


def _request(i: int, *, thread: str = "bench", timeout_s: float = 3600.0) -> ApprovalRequest:
    from tests.store.factories import make_request

    return make_request(
        request_id=f"{thread}-{i}",
        thread=thread,
        calls=((f"c{i}", "delete_record", {"i": i}),),
        timeout_s=timeout_s,
    )


def _approve(now: Any) -> Callable[[ApprovalRequest], Transition]:
    from tests.store.factories import decision

    def mutate(req: ApprovalRequest) -> Transition:
        record = decision(req.calls[0].tool_call_id, approver="alice")
        return apply_decisions(req, [record], approver_roles=(), now=now)

    return mutate


def _expire(now: Any) -> Callable[[ApprovalRequest], Transition]:
    def mutate(req: ApprovalRequest) -> Transition:
        return due_transition(req, now) or Transition(req, changed=False)

    return mutate


# ---------------------------------------------------------------- store operations
async def _store_ops(url: str, n: int) -> dict[str, Any]:
    from tests.store.factories import created_events

    create_ms, decide_ms = [], []
    async with _store(url, "bench_ops") as store, _store(url, "bench_ops") as other:
        for i in range(n + 20):
            request = _request(i, thread="ops")
            t0 = time.perf_counter_ns()
            await store.create_request(request, created_events(request))
            t1 = time.perf_counter_ns()
            await store.update_request(request.id, _approve(utcnow()))
            t2 = time.perf_counter_ns()
            if i >= 20:  # warm-up: prepared statements, connection pool
                create_ms.append((t1 - t0) / 1e6)
                decide_ms.append((t2 - t1) / 1e6)
        concurrent = await _concurrent_decides(store, other, n)
        statements = await asyncio.to_thread(_statements_only, store, n)
    return {
        "create_audit_notify_ms": summarize(create_ms, 3),
        "decide_audit_notify_ms": summarize(decide_ms, 3),
        "statement_only_ms": statements,
        # a decision on a row this store wrote last skips the read (store/_written.py)
        "round_trips": {
            "create": 1,
            "decide": 1 if store.stats()["updates_without_read"] >= n else 2,
            "decide_after_another_process_wrote": 2,
        },
        "concurrent_decides": concurrent,
    }


def _statements_only(store: Any, n: int) -> dict[str, Any]:
    """The two write statements alone, on a plain connection (no Python state machine, no
    thread hops): what the database charges per create and per decision."""
    import psycopg
    from tests.store.factories import created_events

    from signoff.store import _pg_sql
    from signoff.store._idempotency import fingerprints

    create_ms, decide_ms = [], []
    with psycopg.connect(store.dsn, autocommit=True) as conn:
        for i in range(n + 20):
            request = _request(i, thread="stmt")
            events = created_events(request)
            params = _pg_sql.create_params(
                request, events, fingerprints(request), store.origin, store.channel
            )
            transition = _approve(utcnow())(request)
            update = _pg_sql.update_params(transition, 0, store.origin, store.channel)
            t0 = time.perf_counter_ns()
            conn.execute(store._sql.create, params).fetchone()
            t1 = time.perf_counter_ns()
            conn.execute(store._sql.update, update).fetchone()
            t2 = time.perf_counter_ns()
            if i >= 20:
                create_ms.append((t1 - t0) / 1e6)
                decide_ms.append((t2 - t1) / 1e6)
    return {
        "create_audit_notify": summarize(create_ms, 3),
        "decide_audit_notify": summarize(decide_ms, 3),
    }


async def _concurrent_decides(store: Any, other: Any, n: int) -> dict[str, Any]:
    from tests.store.factories import created_events

    ids = []
    for i in range(n):
        request = _request(i, thread="conc")
        await store.create_request(request, created_events(request))
        ids.append(request.id)

    async def decider(k: int) -> None:
        for request_id in ids[k::AGENTS]:
            await (store if k % 2 else other).update_request(request_id, _approve(utcnow()))

    start = time.perf_counter()
    await asyncio.gather(*(decider(k) for k in range(AGENTS)))
    elapsed = time.perf_counter() - start
    return {"tasks": AGENTS, "stores": 2, "decisions_per_s": round(n / elapsed, 1)}


async def _chain_lock(url: str, seconds: float) -> dict[str, Any]:
    """What the audit chain's one-row lock costs: 8 connections appending one event per
    statement through ``audit_append`` (serialized on ``audit_head``), against the same 8
    inserting into a table without a chain (only WAL flushes shared)."""
    import psycopg
    from psycopg import sql

    from signoff.model import AuditEvent
    from signoff.store._pg_audit import entries_json

    async with _store(url, "bench_chain"):
        pass  # creates the schema
    s = sql.Identifier("bench_chain")
    entries = entries_json([AuditEvent(event="allowed", tool="t", data={"n": 1})])
    chained = sql.SQL("SELECT {}.audit_append(%s::json, 'bench')").format(s)
    plain = sql.SQL("INSERT INTO {}.unchained (data) VALUES (%s::json)").format(s)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(sql.SQL("CREATE TABLE {}.unchained (data json)").format(s))

    async def hammer(statement: Any, params: tuple[Any, ...]) -> float:
        conns = [await psycopg.AsyncConnection.connect(url, autocommit=True) for _ in range(8)]
        count, stop_at = 0, time.perf_counter() + seconds

        async def one(conn: Any) -> None:
            nonlocal count
            while time.perf_counter() < stop_at:
                await conn.execute(statement, params)
                count += 1

        started = time.perf_counter()
        await asyncio.gather(*(one(c) for c in conns))
        elapsed = time.perf_counter() - started
        for conn in conns:
            await conn.close()
        return round(count / elapsed, 0)

    with_chain = await hammer(chained, (entries,))
    without = await hammer(plain, (entries,))
    return {
        "connections": 8,
        "chained_appends_per_s": with_chain,
        "unchained_inserts_per_s": without,
        "chain_cost": round(1 - with_chain / without, 2) if without else None,
    }


# ---------------------------------------------------------------- wake across replicas
async def _spawn(*args: str) -> asyncio.subprocess.Process:
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.postgres", *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    assert worker.stdout is not None
    line = await asyncio.wait_for(worker.stdout.readline(), 60)
    if line.strip() != b"ready":
        raise AssertionError(f"the worker {args[0]} did not start: {line!r}")
    return worker


async def _ask(worker: asyncio.subprocess.Process, message: dict[str, Any]) -> dict[str, Any]:
    assert worker.stdin is not None and worker.stdout is not None
    worker.stdin.write(json.dumps(message).encode() + b"\n")
    await worker.stdin.drain()
    reply: dict[str, Any] = json.loads(await asyncio.wait_for(worker.stdout.readline(), 30))
    return reply


async def _wake(url: str, n: int) -> dict[str, Any]:
    from tests.store.factories import created_events

    rng = random.Random(3)
    wake_ms, decide_ms = [], []
    worker = await _spawn("decider", url, "bench_wake")
    try:
        async with _store(url, "bench_wake") as store:
            for i in range(n + 5):
                request = _request(i, thread="wake")
                await store.create_request(request, created_events(request))
                waiter = asyncio.create_task(store.wait(request.id, timeout=30))
                while not store.stats()["waiters"] or not store.stats()["listening"]:
                    await asyncio.sleep(0.0005)
                await asyncio.sleep(0.002 + rng.uniform(0.0, 0.02))
                reply = await _ask(worker, {"id": request.id})
                done = await waiter
                woke = time.monotonic_ns()
                if done.status != "resolved":
                    raise AssertionError(f"{request.id} ended {done.status}")
                if i >= 5:
                    wake_ms.append((woke - reply["t0_ns"]) / 1e6)
                    decide_ms.append((reply["t1_ns"] - reply["t0_ns"]) / 1e6)
            stats = store.stats()
    finally:
        await _stop(worker)
    return {
        "requests": n,
        "wake_ms": summarize(wake_ms, 3),
        "decide_call_in_other_replica_ms": summarize(decide_ms, 3),
        "cross_process_wakes": stats["cross_process_wakes"],
    }


async def _stop(worker: asyncio.subprocess.Process) -> None:
    if worker.stdin is not None:
        worker.stdin.close()
    try:
        await asyncio.wait_for(worker.wait(), 30)
    except TimeoutError:
        worker.kill()


# ---------------------------------------------------------------- cycles through the gate
async def _cycles(url: str, schema: str, n: int, two_replicas: bool) -> dict[str, Any]:
    gate = Gate(fixtures.policy(), _store(url, schema))
    await gate.astart()
    worker = await _spawn("gate-decider", url, schema) if two_replicas else None
    latencies: list[float] = []

    async def decide(request_id: str) -> None:
        if worker is None:
            await gate.adecide(request_id, [{"type": "approve"}], approver=fixtures.APPROVER)
        else:  # the other replica decides; the agent hears of it by NOTIFY, no reply needed
            assert worker.stdin is not None
            worker.stdin.write(json.dumps({"id": request_id}).encode() + b"\n")

    async def agent(k: int, count: int) -> None:
        ctx = fixtures.agent_context(gate.policy, thread=f"{schema}-{k}")
        for i in range(count):
            start = time.perf_counter_ns()
            sub = await gate.asubmit([fixtures.prod_delete(k * 100_000 + i)], ctx)
            assert sub.request is not None
            waiting = asyncio.create_task(gate.await_request(sub.request.id))
            await asyncio.sleep(0)
            await decide(sub.request.id)
            if (await waiting).status != "resolved":
                raise AssertionError("a cycle did not resolve")
            latencies.append((time.perf_counter_ns() - start) / 1e6)

    try:
        await agent(99, 10)  # warm-up
        latencies.clear()
        started = time.perf_counter()
        await asyncio.gather(*(agent(k, n // AGENTS) for k in range(AGENTS)))
        elapsed = time.perf_counter() - started
    finally:
        if worker is not None:
            await _stop(worker)
        await gate.aclose()
    done = (n // AGENTS) * AGENTS
    return {
        "replicas": 2 if two_replicas else 1,
        "agents": AGENTS,
        "cycles": done,
        "cycles_per_s": round(done / elapsed, 1),
        "cycle_latency_ms": summarize(latencies, 3),
    }


# ---------------------------------------------------------------- the sweeper
async def _sweeper(url: str, pending: int, due: int) -> dict[str, Any]:
    schema = "bench_sweep"
    async with _store(url, schema):
        pass  # creates the schema
    _bulk_insert(url, schema, pending, due)
    idle_claim, idle_next = [], []
    async with _store(url, schema) as store:
        before_any_deadline = utcnow() - timedelta(hours=1)  # nothing is due yet
        for _ in range(300):
            t0 = time.perf_counter_ns()
            assert await store.due_requests(before_any_deadline, limit=200) == []
            t1 = time.perf_counter_ns()
            await store.next_due_at()
            t2 = time.perf_counter_ns()
            idle_claim.append((t1 - t0) / 1e6)
            idle_next.append((t2 - t1) / 1e6)
        plan = _claim_plan(store)
    sweepers = [await _spawn("sweep", url, schema) for _ in range(2)]
    started = time.perf_counter()
    outcomes = await asyncio.gather(*(_ask(s, {"go": True}) for s in sweepers))
    elapsed = time.perf_counter() - started
    for sweeper in sweepers:
        await _stop(sweeper)
    first, second = (set(o["expired"]) for o in outcomes)
    return {
        "pending_not_due": pending + due,
        "due_later": due,
        "idle_claim_ms": summarize(idle_claim, 3),
        "idle_next_due_ms": summarize(idle_next, 3),
        "claim_uses_partial_index": "requests_due" in plan,
        "two_sweepers": {
            "expired": len(first) + len(second),
            "split": [len(first), len(second)],
            "expired_by_both": len(first & second),
            "rows_per_s": round((len(first) + len(second)) / elapsed, 0),
        },
    }


def _bulk_insert(url: str, schema: str, pending: int, due: int) -> None:
    """Rows straight into the table (INSERT … SELECT generate_series), valid docs included:
    ``pending`` due in a day, ``due`` whose deadline passed five minutes ago."""
    import psycopg
    from psycopg import sql

    insert = sql.SQL(
        "INSERT INTO {s}.requests (id, kind, thread, status, created_at, due_at, version, doc) "
        "SELECT %(p)s || g, 'tool_call', 'bulk', 'pending', %(created)s, %(due)s, 0, "
        "replace(%(doc)s, 'TEMPLATE', %(p)s || g)::json FROM generate_series(1, %(n)s) g"
    ).format(s=sql.Identifier(schema))
    with psycopg.connect(url, autocommit=True) as conn:
        for prefix, count, age, timeout in (("p", pending, 0, 86_400.0), ("d", due, 300, 60.0)):
            created = utcnow() - timedelta(seconds=age)
            doc = _request(0, thread="bulk", timeout_s=timeout)
            doc.id, doc.created_at = "TEMPLATE", created
            doc.expires_at = created + timedelta(seconds=timeout)
            conn.execute(
                insert,
                {
                    "p": prefix,
                    "created": created,
                    "due": doc.expires_at,
                    "doc": doc.model_dump_json(),
                    "n": count,
                },
            )
        conn.execute(sql.SQL("ANALYZE {}.requests").format(sql.Identifier(schema)))


def _claim_plan(store: Any) -> str:
    import psycopg

    with psycopg.connect(store.dsn, autocommit=True) as conn:
        rows = conn.execute(
            b"EXPLAIN " + store._sql.claim_due,
            {"now": utcnow(), "origin": "x", "limit": 200, "lease_s": 10.0},
        ).fetchall()
    return "\n".join(str(r[0]) for r in rows)


# ---------------------------------------------------------------- the benchmark
def available() -> bool:
    """A database to measure: ``BENCH_PG_DSN``, or PostgreSQL's binaries for a cluster."""
    from tests.store.pg_cluster import pg_bin

    return bool(os.environ.get("BENCH_PG_DSN")) or pg_bin() is not None


def cycles_store(url: str, schema: str) -> Any:
    """A fresh schema's store for the cycles benchmark (:mod:`benchmarks.cycles`)."""
    return _store(url, f"{schema}_{os.getpid()}_{random.randrange(1 << 30)}")


def database() -> tuple[str, Callable[[], None]]:
    """(URL, stop): ``BENCH_PG_DSN``, or a durable throwaway cluster."""
    url = os.environ.get("BENCH_PG_DSN")
    if url:
        return url, lambda: None
    from tests.store.pg_cluster import Cluster

    cluster = Cluster(fast=False).start()
    return cluster.url, cluster.stop


def run(quick: bool) -> dict[str, Any]:
    url, stop = database()
    try:
        result: dict[str, Any] = {
            "method": (
                "durable throwaway cluster (fsync, synchronous_commit on) over TCP loopback; "
                "store API timings (perf_counter_ns); wake = decide start in another process "
                "-> waiter resumes here (monotonic_ns); cycles = submit -> decide -> resume "
                f"through the Gate with {AGENTS} agents; sweeper = idle claim + next_due_at "
                "with N pending, then 2 sweeper processes expiring the due ones"
            ),
            "store_ops": asyncio.run(_store_ops(url, 200 if quick else 1000)),
            "audit_chain_lock": asyncio.run(_chain_lock(url, 1.0 if quick else 3.0)),
            "wake_across_replicas": asyncio.run(_wake(url, 30 if quick else 300)),
            "cycles": {
                "one_replica": asyncio.run(_cycles(url, "bench_c1", 80 if quick else 800, False)),
                "two_replicas": asyncio.run(_cycles(url, "bench_c2", 80 if quick else 800, True)),
            },
            "sweeper": asyncio.run(
                _sweeper(url, 20_000 if quick else 100_000, 2_000 if quick else 10_000)
            ),
        }
    finally:
        stop()
    return judge(result, [WAKE_TARGET, IDLE_SWEEP_TARGET])


def rows(result: dict[str, Any]) -> list[Row]:
    ops, wake, sweep = result["store_ops"], result["wake_across_replicas"], result["sweeper"]
    met = result["targets_met"]

    def p50_99(s: dict[str, Any], digits: int = 2) -> str:
        return f"{fmt(s['median'], 'ms', digits)} / {fmt(s['p99'], 'ms', digits)}"

    stmt = ops["statement_only_ms"]
    out = [
        Row(
            "PG create + audit + NOTIFY (1 statement), p50/p99",
            p50_99(ops["create_audit_notify_ms"]),
            note=f"the statement alone {p50_99(stmt['create_audit_notify'])}",
        ),
        Row(
            "PG decide + audit + NOTIFY (read + 1 statement), p50/p99",
            p50_99(ops["decide_audit_notify_ms"]),
            note=f"the write statement alone {p50_99(stmt['decide_audit_notify'])}; "
            f"{ops['concurrent_decides']['decisions_per_s']:,.0f} decisions/s with 8 tasks "
            "on 2 stores",
        ),
        Row(
            "PG decide -> waiter resumed across replicas, p50/p99",
            p50_99(wake["wake_ms"]),
            f"≤ 10 ms: {mark(met[WAKE_TARGET.describe()])}",
            f"decide call {fmt(wake['decide_call_in_other_replica_ms']['median'], 'ms')}; "
            f"n={wake['requests']}",
        ),
    ]
    chain = result["audit_chain_lock"]
    out.append(
        Row(
            "PG audit chain lock: 8 connections appending, chained / unchained",
            f"{chain['chained_appends_per_s']:,.0f} / {chain['unchained_inserts_per_s']:,.0f} /s",
            note="every state change and audit batch takes the one-row audit_head lock",
        )
    )
    for key, label in (("one_replica", "1 replica"), ("two_replicas", "2 replicas")):
        c = result["cycles"][key]
        out.append(
            Row(
                f"PG submit -> decide -> resume, {label}, {c['agents']} agents",
                fmt(c["cycles_per_s"], "/s", 0),
                note=f"cycle p50 {fmt(c['cycle_latency_ms']['median'], 'ms')}",
            )
        )
    two = sweep["two_sweepers"]
    out += [
        Row(
            f"PG idle sweep with {sweep['pending_not_due']:,} pending, claim / next_due p50",
            f"{fmt(sweep['idle_claim_ms']['median'], 'ms', 3)} / "
            f"{fmt(sweep['idle_next_due_ms']['median'], 'ms', 3)}",
            f"≤ 2 ms: {mark(met[IDLE_SWEEP_TARGET.describe()])}",
            "partial index" if sweep["claim_uses_partial_index"] else "NO INDEX",
        ),
        Row(
            "PG two sweepers expiring due requests",
            fmt(two["rows_per_s"], "rows/s", 0),
            note=f"split {two['split'][0]:,}/{two['split'][1]:,}; expired by both: "
            f"{two['expired_by_both']}",
        ),
    ]
    return out


# ---------------------------------------------------------------- worker processes
async def _worker(role: str, url: str, schema: str) -> None:
    """``decider``: approve ids read from stdin through a store (another replica);
    ``gate-decider``: the same through a Gate, concurrently; ``sweep``: expire due requests."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    if role == "gate-decider":
        gate = Gate(fixtures.policy(), _store(url, schema))
        await gate.astart()
        print("ready", flush=True)
        pending: set[asyncio.Task[None]] = set()
        while line := await reader.readline():
            task = asyncio.create_task(_gate_decide(gate, json.loads(line)["id"]))
            pending.add(task)
            task.add_done_callback(pending.discard)
        await asyncio.gather(*pending)
        await gate.aclose()
        return
    async with _store(url, schema) as store:
        print("ready", flush=True)
        while line := await reader.readline():
            if role == "decider":
                request_id = json.loads(line)["id"]
                t0 = time.monotonic_ns()
                await store.update_request(request_id, _approve(utcnow()))
                reply = {"t0_ns": t0, "t1_ns": time.monotonic_ns()}
            else:
                reply = {"expired": await _sweep_all(store)}
            print(json.dumps(reply), flush=True)


async def _gate_decide(gate: Gate, request_id: str) -> None:
    await gate.adecide(request_id, [{"type": "approve"}], approver=fixtures.APPROVER)


async def _sweep_all(store: Any) -> list[str]:
    expired: list[str] = []
    while ids := await store.due_requests(utcnow(), limit=200):
        for request_id in ids:
            now = utcnow()
            tr = await store.update_request(
                request_id,
                lambda r, now=now: due_transition(r, now) or Transition(r, changed=False),
            )
            if tr.changed:
                expired.append(request_id)
    return expired


if __name__ == "__main__":
    asyncio.run(_worker(sys.argv[1], sys.argv[2], sys.argv[3]))
