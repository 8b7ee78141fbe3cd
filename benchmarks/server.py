"""The approval server over HTTP: resume latency, 1,000 parked agents, cycles per second.

``signoff serve`` runs as its own process (SQLite, ``synchronous=FULL``, access log off), so
its memory and CPU can be read from ``/proc``; the agents and approvers are async httpx
clients in this one process.

* **resume**: a remote agent (:class:`~signoff.client.RemoteGate`) long-polls
  ``GET /v1/requests/{id}/wait``; an approver POSTs the decision. Latency = start of the
  decision POST → the agent's ``await_request`` returning (``perf_counter_ns``).
* **many waiters**: 1,000 requests, 1,000 concurrent long-polls parked on the server; the
  server's RSS and CPU while they all wait (an idle window), then every request is decided
  and every waiter must wake with ``resolved``.
* **cycles/s**: concurrent agents each running submit → wait → decide → resumed, over HTTP.

``python -m benchmarks.server instructions [N RUNS]`` (not part of ``make bench``: it takes
minutes) counts the instructions the server process executes per HTTP cycle under valgrind's
callgrind: a steady measure where CPU seconds move with the machine's load (see
:func:`instructions_per_cycle`).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks import fixtures
from benchmarks.measure import Row, Target, fmt, judge, mark, summarize
from signoff import CallContext, Principal
from signoff.client import RemoteGate

AGENT = "bench-agent"
RESUME_TARGET = Target("resume.wake_ms.median", "<=", 10.0, "ms")
WAKE_ALL_TARGET = Target("many_waiters.woken_fraction", ">=", 1.0, "")
REVOCATION_TARGET = Target("token_revocation.refused_after_ms.max", "<=", 1000.0, "ms")
CONCURRENT_AGENTS = 8
WAITERS_PER_CLIENT = 50


# ---------------------------------------------------------------------- the server process
class ServerProcess:
    # a command put in front of ``python -m signoff serve`` (valgrind), and how long start-up
    # may take with it
    wrapper: tuple[str, ...] = ()
    start_timeout = 60.0
    env: dict[str, str] | None = None  # None: this process's environment

    def __init__(self, directory: Path) -> None:
        self.config = directory / "signoff.yaml"
        self.config.write_text(
            f"{fixtures.POLICY_YAML}store: sqlite:///{(directory / 'server.db').resolve()}\n"
            # 1,000 parked long-polls plus the other clients: above the 1,000 default
            "serve:\n  access_log: false\n  max_connections: 4000\n",
            encoding="utf-8",
        )
        self.log = directory / "server.log"
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def token(self, *args: str) -> str:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "signoff",
                "token",
                "create",
                *args,
                "--json",
                "--config",
                str(self.config),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        return str(json.loads(out.stdout)["token"])

    def start_with_tokens(self) -> tuple[str, str]:
        """Issue the agent's and the approver's tokens, then start: (agent, approver)."""
        agent = self.token("--agent", AGENT)
        approver = self.token("--approver", fixtures.APPROVER)
        self.start()
        return agent, approver

    def start(self) -> None:
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    *self.wrapper,
                    sys.executable,
                    "-m",
                    "signoff",
                    "serve",
                    "--config",
                    str(self.config),
                    "--port",
                    str(self.port),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
            )
        deadline = time.monotonic() + self.start_timeout
        while True:  # process start-up only
            try:
                if httpx.get(f"{self.url}/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError("signoff serve did not start:\n" + self.log.read_text())
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def rss_mb(self) -> float:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
        return float("nan")

    def cpu_s(self) -> float:
        assert self.proc is not None
        return _cpu_s(Path(f"/proc/{self.proc.pid}/stat"))

    def cpu_split_s(self) -> dict[str, float]:
        """CPU seconds so far: the event loop's thread (the main one), the other threads
        (store writer, readers, watcher), and the kernel's share of the whole process."""
        assert self.proc is not None
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        loop = _cpu_s(Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/stat"))
        total = _cpu_s(Path(f"/proc/{self.proc.pid}/stat"))
        return {
            "loop": loop,
            "other_threads": total - loop,
            "system": int(stat[12]) / os.sysconf("SC_CLK_TCK"),
        }


def _cpu_s(stat: Path) -> float:
    """utime + stime of a process or thread, in seconds."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _context(thread: str) -> CallContext:
    return CallContext(principal=Principal(fixtures.AGENT), thread=thread, agent=AGENT)


def _body(call_id: str, record_id: int, thread: str) -> dict[str, Any]:
    call = fixtures.prod_delete(record_id, call_id)
    return {
        "tool_calls": [{"id": call.id, "name": call.name, "args": dict(call.args)}],
        "context": {"principal": {"id": fixtures.AGENT}, "thread": thread, "agent": AGENT},
    }


APPROVE = {"decisions": [{"type": "approve"}]}


# ---------------------------------------------------------------------- 1. resume latency
async def _resume(server: ServerProcess, agent: str, approver: str, n: int) -> dict[str, Any]:
    remote = RemoteGate(server.url, agent)
    clock = time.perf_counter_ns
    wake_ms: list[float] = []
    post_ms: list[float] = []
    async with httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {approver}"}
    ) as decider:
        try:
            ctx = _context("bench-resume")
            for i in range(n + 5):
                call = fixtures.prod_delete(i, f"resume-{i}")
                sub = await remote.asubmit([call], ctx, fetch=False)
                assert sub.request_id is not None
                woke: list[int] = []

                async def wait(rid: str = sub.request_id, woke: list[int] = woke) -> None:
                    req = await remote.await_request(rid)
                    woke.append(clock())
                    assert req.status == "resolved"

                task = asyncio.create_task(wait())
                await asyncio.sleep(0.02)  # let the long-poll park on the server
                t0 = clock()
                answer = await decider.post(
                    f"/v1/requests/{sub.request_id}/decisions", json=APPROVE
                )
                t1 = clock()
                assert answer.status_code == 200, answer.text
                await asyncio.wait_for(task, 30)
                if i >= 5:  # warm-up: connections, caches
                    wake_ms.append((woke[0] - t0) / 1e6)
                    post_ms.append((t1 - t0) / 1e6)
        finally:
            await remote.aclose()
    return {
        "requests": n,
        "wake_ms": summarize(wake_ms, 3),
        "decision_post_ms": summarize(post_ms, 3),
    }


# ---------------------------------------------------------------------- 2. many waiters
async def _gather_limited(jobs: list[Any], limit: int) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def run(job: Any) -> Any:
        async with gate:
            return await job

    return await asyncio.gather(*(run(j) for j in jobs))


async def _many_waiters(
    server: ServerProcess, agent: str, approver: str, n: int, idle_s: float
) -> dict[str, Any]:
    # httpx's pool does per-request work proportional to its open connections, so the
    # waiters are spread over clients of WAITERS_PER_CLIENT connections each (one process,
    # one event loop, as many agents in one async worker would be).
    timeout = httpx.Timeout(60.0)
    clients = [
        httpx.AsyncClient(
            base_url=server.url,
            headers={"Authorization": f"Bearer {agent}"},
            limits=httpx.Limits(
                max_connections=WAITERS_PER_CLIENT, max_keepalive_connections=WAITERS_PER_CLIENT
            ),
            timeout=timeout,
        )
        for _ in range(-(-n // WAITERS_PER_CLIENT))
    ]
    deciders = httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {approver}"}, timeout=timeout
    )
    clock = time.perf_counter_ns
    try:
        submitted = await _gather_limited(
            [
                clients[0].post("/v1/requests", json=_body(f"many-{i}", i, f"bench-many-{i}"))
                for i in range(n)
            ],
            32,
        )
        ids = [r.json()["id"] for r in submitted]
        rss_idle = server.rss_mb()
        woke_at: dict[str, int] = {}
        reconnects = 0

        async def wait(client: httpx.AsyncClient, rid: str) -> str:
            nonlocal reconnects
            while True:
                r = await client.get(f"/v1/requests/{rid}/wait", params={"timeout": 25})
                status = str(r.json()["status"])
                if status != "pending":
                    woke_at[rid] = clock()
                    return status
                reconnects += 1

        tasks = [
            asyncio.create_task(wait(clients[i // WAITERS_PER_CLIENT], rid))
            for i, rid in enumerate(ids)
        ]
        parked = await _until_parked(deciders, n)
        cpu0, t0 = server.cpu_s(), time.monotonic()
        await asyncio.sleep(idle_s)
        cpu_idle = (server.cpu_s() - cpu0) / (time.monotonic() - t0)
        rss_parked = server.rss_mb()
        decided_at: dict[str, int] = {}

        async def decide(rid: str) -> None:
            decided_at[rid] = clock()
            r = await deciders.post(f"/v1/requests/{rid}/decisions", json=APPROVE)
            assert r.status_code == 200, r.text

        start = clock()
        await _gather_limited([decide(rid) for rid in ids], 16)
        statuses = await asyncio.wait_for(asyncio.gather(*tasks), 120)
        end = clock()
    finally:
        for client in [*clients, deciders]:
            await client.aclose()
    woken = sum(1 for s in statuses if s == "resolved")
    return {
        "waiters": n,
        "http_clients": len(clients),
        "parked_seen": parked,
        "server_rss_mb": {"before_waiters": rss_idle, "with_waiters_parked": rss_parked},
        "server_rss_per_waiter_kb": round((rss_parked - rss_idle) * 1024 / n, 1),
        "server_cpu_percent_while_parked": round(cpu_idle * 100, 2),
        "idle_window_s": idle_s,
        "woken": woken,
        "woken_fraction": woken / n,
        "reconnects": reconnects,
        "decide_all_then_all_woken_s": round((end - start) / 1e9, 2),
        "wake_after_own_decision_ms": summarize(
            [(woke_at[r] - decided_at[r]) / 1e6 for r in ids if r in woke_at], 2
        ),
        "client_process_max_rss_mb": round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
        ),
    }


async def _until_parked(client: httpx.AsyncClient, n: int, limit_s: float = 60) -> int:
    """Read the server's ``signoff_long_polls`` gauge until every waiter is parked."""
    deadline = time.monotonic() + limit_s
    seen = 0
    while time.monotonic() < deadline:
        text = (await client.get("/metrics")).text
        for line in text.splitlines():
            if line.startswith("signoff_long_polls "):
                seen = int(float(line.split()[1]))
        if seen >= n:
            return seen
        await asyncio.sleep(0.2)  # measurement scaffolding, not part of what is measured
    return seen


# ---------------------------------------------------------------------- 3. cycles per second
async def _cycles(
    server: ServerProcess, agent: str, approver: str, cycles: int, concurrency: int
) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=4 * concurrency)
    async with (
        httpx.AsyncClient(
            base_url=server.url, headers={"Authorization": f"Bearer {agent}"}, limits=limits
        ) as agents,
        httpx.AsyncClient(
            base_url=server.url, headers={"Authorization": f"Bearer {approver}"}, limits=limits
        ) as deciders,
    ):
        per_worker = max(1, cycles // concurrency)
        cycle_ms: list[float] = []

        async def worker(w: int) -> None:
            for i in range(per_worker):
                t0 = time.perf_counter_ns()
                sub = await agents.post(
                    "/v1/requests", json=_body(f"cyc-{w}-{i}", i, f"bench-cyc-{w}")
                )
                rid = sub.json()["id"]
                waiting = asyncio.create_task(
                    agents.get(f"/v1/requests/{rid}/wait", params={"timeout": 25})
                )
                decided = await deciders.post(f"/v1/requests/{rid}/decisions", json=APPROVE)
                assert decided.status_code == 200, decided.text
                assert (await waiting).json()["status"] == "resolved"
                cycle_ms.append((time.perf_counter_ns() - t0) / 1e6)

        start, cpu0, split0 = time.perf_counter(), server.cpu_s(), server.cpu_split_s()
        await asyncio.gather(*(worker(w) for w in range(concurrency)))
        elapsed, cpu = time.perf_counter() - start, server.cpu_s() - cpu0
        split = {k: v - split0[k] for k, v in server.cpu_split_s().items()}
    done = per_worker * concurrency
    return {
        "cycles": done,
        "concurrent_agents": concurrency,
        "cycles_per_s": round(done / elapsed, 1),
        # the server shares the 2 cores with this load generator: its CPU per cycle is the
        # number that does not depend on how fast the clients are
        "server_cpu_ms_per_cycle": round(1000 * cpu / done, 3),
        # where it goes: the event loop's thread (HTTP, handlers, the gate's Python) vs the
        # store's threads; and the kernel's part of the total (clock ticks: 10 ms resolution)
        "server_cpu_ms_per_cycle_split": {k: round(1000 * v / done, 3) for k, v in split.items()},
        "http_requests_per_s": round(3 * done / elapsed, 1),
        "cycle_ms": summarize(cycle_ms, 2),
    }


# ---------------------------------------------------------------------- 4. token revocation
async def _revocation(server: ServerProcess, rounds: int) -> dict[str, Any]:
    """A token revoked by another process (this one, with its own connection to the file, as
    ``signoff token revoke`` has) while the server holds it in its token cache: revoke returns
    → the server's first 401, polling every 2 ms; a random 0-0.6 s phase against the cache's
    0.5 s version check."""
    from signoff.server.db_sqlite import SQLiteServerDB
    from signoff.server.tokens import create_token, revoke_token

    db = SQLiteServerDB(str(server.config.parent / "server.db"))
    await db.open()
    rng = random.Random(7)
    latencies: list[float] = []
    try:
        async with httpx.AsyncClient(base_url=server.url) as client:
            for _ in range(rounds):
                raw, record = await create_token(db, "agent", AGENT)
                headers = {"Authorization": f"Bearer {raw}"}
                for _ in range(2):  # the second one is answered from the cache
                    assert (await client.get("/v1/me", headers=headers)).status_code == 200
                await asyncio.sleep(rng.uniform(0, 0.6))
                assert await revoke_token(db, record.id)
                revoked = time.perf_counter()
                while (await client.get("/v1/me", headers=headers)).status_code == 200:
                    await asyncio.sleep(0.002)
                latencies.append((time.perf_counter() - revoked) * 1000)
    finally:
        await db.close()
    return {"rounds": rounds, "refused_after_ms": summarize(latencies, 1)}


# ---------------------------------------------------------------------- 5. instructions per cycle
class CallgrindServer(ServerProcess):
    """``signoff serve`` under ``valgrind --tool=callgrind`` (about 50x slower)."""

    start_timeout = 600.0

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.out = directory / "callgrind.out"
        self.wrapper = (
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={self.out}.%p",
            "--dump-instr=no",
        )
        # the same string hashing (dict and set layouts) from run to run
        self.env = {**os.environ, "PYTHONHASHSEED": "0"}

    def dump(self) -> int:
        """Instructions executed since the last dump (``callgrind_control -d``)."""
        assert self.proc is not None
        pattern = f"{self.out.name}.{self.proc.pid}.*"
        before = set(self.out.parent.glob(pattern))
        subprocess.run(
            ["callgrind_control", "-d", str(self.proc.pid)], check=True, capture_output=True
        )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            for path in set(self.out.parent.glob(pattern)) - before:
                for line in path.read_text(errors="replace").splitlines():
                    if line.startswith(("totals:", "summary:")):
                        return int(line.split()[1])
            time.sleep(0.2)  # the dump is written by the server process, asynchronously
        raise AssertionError("callgrind wrote no dump")


def instructions_per_cycle(n: int = 64, runs: int = 3) -> dict[str, Any]:
    """Instructions per HTTP cycle executed by the server process (all its threads, user
    space; the kernel's part is not counted). After an 80-cycle warm-up the counters are
    reset, then ``runs`` runs of ``n`` cycles are counted one by one; the result is the
    median run's instructions / ``n`` (``PYTHONHASHSEED=0``). Each run's own fixed cost (two
    new httpx clients' connections) is included. Short runs on purpose: the store's cost per
    cycle changes as a fresh database grows (see docs/benchmarks.md, round 6), and the
    time-driven work of an idle server (token and data_version checks, the sweeper: ~1.7 M
    instructions per second under callgrind) grows with a run's length."""
    per_run: list[int] = []
    with tempfile.TemporaryDirectory(prefix="signoff-bench-callgrind-") as tmp:
        server = CallgrindServer(Path(tmp))
        agent, approver = server.start_with_tokens()
        try:
            asyncio.run(_cycles(server, agent, approver, 80, CONCURRENT_AGENTS))
            server.dump()
            for _ in range(runs):
                asyncio.run(_cycles(server, agent, approver, n, CONCURRENT_AGENTS))
                per_run.append(server.dump())
        finally:
            server.stop()
    return {
        "cycles_per_run": n,
        "instructions_per_run": per_run,
        "instructions_per_cycle": round(sorted(per_run)[len(per_run) // 2] / n),
    }


# ---------------------------------------------------------------------- entry points
def run(quick: bool) -> dict[str, Any]:
    n_resume = 30 if quick else 300
    n_waiters = 200 if quick else 1000
    idle_s = 2.0 if quick else 5.0
    n_cycles = 80 if quick else 800
    with tempfile.TemporaryDirectory(prefix="signoff-bench-server-") as tmp:
        server = ServerProcess(Path(tmp))
        agent, approver = server.start_with_tokens()
        try:
            rss_start = server.rss_mb()
            resume = asyncio.run(_resume(server, agent, approver, n_resume))
            cycles = asyncio.run(_cycles(server, agent, approver, n_cycles, CONCURRENT_AGENTS))
            many = asyncio.run(_many_waiters(server, agent, approver, n_waiters, idle_s))
            revocation = asyncio.run(_revocation(server, 5 if quick else 30))
        finally:
            server.stop()
    result: dict[str, Any] = {
        "method": (
            "signoff serve in its own process (SQLite FULL, loopback HTTP/1.1); resume = start "
            "of the decision POST -> RemoteGate.await_request returns; many_waiters = N "
            "concurrent long-polls from one async httpx client, server RSS/CPU from /proc; "
            "cycles = concurrent agents doing submit -> wait -> decide -> resumed"
        ),
        "server_rss_mb_at_start": rss_start,
        "resume": resume,
        "many_waiters": many,
        "cycles": cycles,
        "token_revocation": revocation,
    }
    return judge(result, [RESUME_TARGET, WAKE_ALL_TARGET, REVOCATION_TARGET])


def rows(result: dict[str, Any]) -> list[Row]:
    met = result["targets_met"]
    r, m, c = result["resume"], result["many_waiters"], result["cycles"]
    t = result["token_revocation"]
    return [
        Row(
            "server: decision POST -> remote agent's wait returns, p50/p99",
            f"{fmt(r['wake_ms']['median'], 'ms', 2)} / {fmt(r['wake_ms']['p99'], 'ms', 2)}",
            f"p50 ≤ 10 ms: {mark(met[RESUME_TARGET.describe()])}",
            f"decision POST itself {fmt(r['decision_post_ms']['median'], 'ms', 2)}; "
            f"n={r['requests']}",
        ),
        Row(
            f"server: {m['waiters']} agents long-polling, all woken",
            f"{m['woken']}/{m['waiters']}",
            f"all: {mark(met[WAKE_ALL_TARGET.describe()])}",
            f"decide all → all woken {m['decide_all_then_all_woken_s']} s; "
            f"reconnects {m['reconnects']}",
        ),
        Row(
            f"server: idle with {m['waiters']} parked waiters",
            f"{m['server_cpu_percent_while_parked']} % CPU, "
            f"{fmt(m['server_rss_mb']['with_waiters_parked'], 'MB', 0)} RSS",
            note=f"+{m['server_rss_per_waiter_kb']} kB per waiter; client process "
            f"{fmt(m['client_process_max_rss_mb'], 'MB', 0)}",
        ),
        Row(
            "server: submit → decide → resume over HTTP",
            fmt(c["cycles_per_s"], "cycles/s", 0),
            note=f"{c['concurrent_agents']} agents; {fmt(c['http_requests_per_s'], 'req/s', 0)}; "
            f"server CPU {fmt(c['server_cpu_ms_per_cycle'], 'ms', 2)}/cycle "
            f"(event loop {fmt(c['server_cpu_ms_per_cycle_split']['loop'], 'ms', 2)}); "
            f"cycle p50 {fmt(c['cycle_ms']['median'], 'ms', 1)}",
        ),
        Row(
            "server: token revoked by another process → refused, p50/max",
            f"{fmt(t['refused_after_ms']['median'], 'ms', 0)} / "
            f"{fmt(t['refused_after_ms']['max'], 'ms', 0)}",
            f"≤ 1 s: {mark(met[REVOCATION_TARGET.describe()])}",
            f"{t['rounds']} rounds, random phase against the 0.5 s token-cache check",
        ),
    ]


if __name__ == "__main__":
    if sys.argv[1:2] != ["instructions"]:
        raise SystemExit("usage: python -m benchmarks.server instructions [N RUNS]")
    sizes = [int(a) for a in sys.argv[2:4]]
    print(json.dumps(instructions_per_cycle(*sizes)))
