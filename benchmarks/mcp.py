"""Added latency of an allowed ``tools/call`` through ``signoff mcp-proxy`` vs calling the
upstream directly.

* **in-process**: a real ``mcp.Client`` → the proxy (``build_proxy``) → the upstream, both hops
  in memory, against the client → upstream in memory. Measured on the 2026-07-28 direct
  dispatcher and on 2025-11-25 (JSON-RPC over memory streams).
* **stdio**: the client spawns ``python -m signoff mcp-proxy -- python upstream`` (3 processes)
  against the client spawning the upstream alone (2 processes): the cost of the extra hop.
* **http**: the upstream serves streamable HTTP on loopback; the client calls it directly, and
  through ``signoff mcp-proxy --transport http --upstream u=<its URL>`` (also on loopback),
  on 2025-11-25 (sessions, SSE) and 2026-07-28. ``ratio`` = proxied median / direct median.
  Wall ratios swing with machine load, so this arm also reports the CPU time per call of the
  proxy process and of the upstream process (``/proc``, Linux): the proxy runs an HTTP
  server *and* an HTTP client per call, the upstream only a server.

Every call is ``echo``, which the policy allows: the proxy runs the schema check, the policy
and an ``allowed`` audit event (SQLite store, batched writer) on each. Direct and proxied
calls alternate call by call on two open connections, so machine noise hits both arms; the
result is the median of the paired differences. Research (mcp-hitl.md §3.5) measured the bare
pass-through at ~0.4-0.7 ms in-process and ~3-4 ms for the stdio hop.
"""

from __future__ import annotations

import logging
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from benchmarks.measure import Row, Target, fmt, judge, mark, summarize

ROOT = Path(__file__).resolve().parent.parent
TARGETS = [
    Target("in_process.modern.added_ms", "<=", 0.5, "ms"),
    Target("stdio.added_ms", "<=", 3.5, "ms"),
    Target("stdio.ratio", "<=", 2.2, "x"),
    Target("http.legacy.ratio", "<=", 1.6, "x"),
    Target("http.modern.ratio", "<=", 1.6, "x"),
]
POLICY = textwrap.dedent(
    """\
    version: 1
    store: sqlite:///bench.db
    defaults:
      unknown_tool: require_approval
    tools:
      echo: {default: allow}
    """
)

Call = Callable[[], Awaitable[Any]]


async def _paired(direct: Call, proxied: Call, n: int, warmup: int) -> dict[str, Any]:
    """Alternate the two arms call by call; ms per call and the paired differences."""
    for _ in range(warmup):
        await direct()
        await proxied()
    times: dict[str, list[float]] = {"direct": [], "proxied": []}
    clock = time.perf_counter_ns
    for i in range(n):
        order = (("direct", direct), ("proxied", proxied))
        for name, call in order if i % 2 == 0 else order[::-1]:
            start = clock()
            await call()
            times[name].append((clock() - start) / 1e6)
    diffs = [p - d for p, d in zip(times["proxied"], times["direct"], strict=True)]
    direct_median = statistics.median(times["direct"])
    return {
        "calls": n,
        "direct_ms": summarize(times["direct"], 3),
        "proxied_ms": summarize(times["proxied"], 3),
        "added_ms": round(statistics.median(diffs), 3),
        "ratio": round(statistics.median(times["proxied"]) / direct_median, 2),
    }


async def _in_process(directory: Path, mode: str, n: int, warmup: int) -> dict[str, Any]:
    from mcp import Client

    from benchmarks._mcp_upstream import make_server
    from signoff import Gate, Policy
    from signoff.integrations.mcp import ProxyOptions, UpstreamSpec, build_proxy

    policy = Policy.from_yaml(POLICY, base_dir=directory)
    async with Gate(policy) as gate:
        upstream = make_server()
        proxy = build_proxy(gate, [UpstreamSpec("", upstream)], ProxyOptions(principal="bench"))
        async with Client(upstream, mode=mode) as direct, Client(proxy, mode=mode) as proxied:
            result = await _paired(
                lambda: direct.call_tool("echo", {"text": "x"}),
                lambda: proxied.call_tool("echo", {"text": "x"}),
                n,
                warmup,
            )
            result["protocol"] = proxied.protocol_version
    return result


async def _stdio(directory: Path, n: int, warmup: int) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters

    config = directory / "signoff.yaml"
    config.write_text(POLICY, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'src'}"}
    # -m from the repository root: run as a file, benchmarks/mcp.py would shadow the mcp package.
    upstream = [sys.executable, "-m", "benchmarks._mcp_upstream"]
    direct_params = StdioServerParameters(command=upstream[0], args=upstream[1:], env=env, cwd=ROOT)
    proxy_args = ["-m", "signoff", "mcp-proxy", "-c", str(config), "--", *upstream]
    proxy_params = StdioServerParameters(command=sys.executable, args=proxy_args, env=env, cwd=ROOT)
    async with Client(direct_params) as direct, Client(proxy_params) as proxied:
        result = await _paired(
            lambda: direct.call_tool("echo", {"text": "x"}),
            lambda: proxied.call_tool("echo", {"text": "x"}),
            n,
            warmup,
        )
        result["protocol"] = proxied.protocol_version
    return result


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu_s(process: subprocess.Popen[bytes]) -> float | None:
    """User + system CPU seconds of a child process (None off Linux)."""
    try:
        stat = Path(f"/proc/{process.pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _with_cpu(
    arm: Awaitable[dict[str, Any]], proxy: subprocess.Popen[bytes], upstream: Any, n: int
) -> dict[str, Any]:
    """Run ``arm`` and add CPU ms per call: the proxy serves ``n`` calls, the upstream
    ``2n`` (direct and proxied)."""
    before = (_cpu_s(proxy), _cpu_s(upstream))
    result = await arm
    after = (_cpu_s(proxy), _cpu_s(upstream))
    if None not in before and None not in after:
        proxy_ms = 1000 * (after[0] - before[0]) / n  # type: ignore[operator]
        upstream_ms = 1000 * (after[1] - before[1]) / (2 * n)  # type: ignore[operator]
        result["proxy_cpu_ms_per_call"] = round(proxy_ms, 3)
        result["upstream_cpu_ms_per_call"] = round(upstream_ms, 3)
    return result


def _listening(port: int, process: subprocess.Popen[bytes]) -> None:
    for _ in range(600):
        if process.poll() is not None:
            raise RuntimeError(f"a benchmark server exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("a benchmark server never listened")


async def _http(directory: Path, n: int, warmup: int) -> dict[str, Any]:
    from mcp import Client

    # httpx2 logs every request at INFO (and importing MCPServer configured INFO logging):
    # measure the calls, not the console.
    logging.getLogger("httpx2").setLevel(logging.WARNING)

    config = directory / "signoff.yaml"
    config.write_text(POLICY, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'src'}"}
    up_port, proxy_port = _free_port(), _free_port()
    upstream_url = f"http://127.0.0.1:{up_port}/mcp"
    proxy_url = f"http://127.0.0.1:{proxy_port}/mcp"
    quiet = {"cwd": ROOT, "env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    upstream = subprocess.Popen(
        [sys.executable, "-m", "benchmarks._mcp_upstream", "--http", str(up_port)], **quiet
    )
    proxy_cmd = [sys.executable, "-m", "signoff", "mcp-proxy", "-c", str(config)]
    proxy_cmd += ["--transport", "http", "--port", str(proxy_port)]
    proxy_cmd += ["--upstream", f"u={upstream_url}"]
    proxy = subprocess.Popen(proxy_cmd, **quiet)
    try:
        _listening(up_port, upstream)
        _listening(proxy_port, proxy)
        out: dict[str, Any] = {}
        for name, mode in (("legacy", "legacy"), ("modern", "auto")):
            async with (
                Client(upstream_url, mode=mode) as direct,
                Client(proxy_url, mode=mode) as proxied,
            ):
                for _ in range(warmup):  # outside the CPU window
                    await direct.call_tool("echo", {"text": "x"})
                    await proxied.call_tool("echo", {"text": "x"})
                arm = _paired(
                    lambda d=direct: d.call_tool("echo", {"text": "x"}),
                    lambda p=proxied: p.call_tool("echo", {"text": "x"}),
                    n,
                    0,
                )
                out[name] = await _with_cpu(arm, proxy, upstream, n)
                out[name]["protocol"] = proxied.protocol_version
        return out
    finally:
        for process in (proxy, upstream):
            process.terminate()
            process.wait(30)


async def _all(quick: bool) -> dict[str, Any]:
    n, warmup = (150, 20) if quick else (600, 60)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        modern = await _in_process(directory, "auto", n, warmup)
        legacy = await _in_process(directory, "legacy", n, warmup)
        stdio = await _stdio(directory, n // 2 if quick else n, warmup)
        http = await _http(directory, n // 2 if quick else n, warmup)
    return {"in_process": {"modern": modern, "legacy": legacy}, "stdio": stdio, "http": http}


def run(quick: bool) -> dict[str, Any]:
    result = anyio.run(_all, quick)
    result["method"] = (
        "echo (allowed) through the proxy vs direct, alternating call by call on two open "
        "connections; added_ms = median of paired differences; SQLite store (batched audit)"
    )
    return judge(result, TARGETS)


def rows(result: dict[str, Any]) -> list[Row]:
    ok = result.get("targets_met", {})
    modern = result["in_process"]["modern"]
    legacy = result["in_process"]["legacy"]
    stdio = result["stdio"]
    http = result["http"]
    return [
        Row(
            "mcp proxy added latency, in-process (2026-07-28)",
            fmt(modern["added_ms"], "ms", 3),
            f"<= 0.5 ms ({mark(ok.get(TARGETS[0].describe(), False))})",
            f"direct {modern['direct_ms']['median']} ms, proxied "
            f"{modern['proxied_ms']['median']} ms",
        ),
        Row(
            "mcp proxy added latency, in-process (2025-11-25)",
            fmt(legacy["added_ms"], "ms", 3),
            "",
            f"direct {legacy['direct_ms']['median']} ms, proxied "
            f"{legacy['proxied_ms']['median']} ms (JSON-RPC framing on both hops)",
        ),
        Row(
            "mcp proxy added latency, stdio hop",
            fmt(stdio["added_ms"], "ms", 3),
            f"<= 3.5 ms ({mark(ok.get(TARGETS[1].describe(), False))})",
            f"direct {stdio['direct_ms']['median']} ms, proxied "
            f"{stdio['proxied_ms']['median']} ms ({stdio['protocol']})",
        ),
        Row(
            "mcp proxy stdio round trip, proxied / direct",
            fmt(stdio["ratio"], "x", 2),
            f"<= 2.2x ({mark(ok.get(TARGETS[2].describe(), False))})",
            "same upstream, same run",
        ),
        *(
            Row(
                f"mcp proxy streamable HTTP round trip, proxied / direct ({era})",
                fmt(http[key]["ratio"], "x", 2),
                f"<= 1.6x ({mark(ok.get(TARGETS[3 + i].describe(), False))})",
                f"direct {http[key]['direct_ms']['median']} ms, proxied "
                f"{http[key]['proxied_ms']['median']} ms; CPU/call proxy "
                f"{http[key].get('proxy_cpu_ms_per_call', '?')} ms, upstream "
                f"{http[key].get('upstream_cpu_ms_per_call', '?')} ms",
            )
            for i, (key, era) in enumerate((("legacy", "2025-11-25"), ("modern", "2026-07-28")))
        ),
    ]
