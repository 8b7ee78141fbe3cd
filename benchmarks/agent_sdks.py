"""The OpenAI Agents SDK and Pydantic AI adapters against each framework on its own.

One scripted agent per framework (a scripted model: the user's message → one tool call → tool
result → a final answer), variants interleaved round by round. Two measurements per framework:

* **ungated step**: the model calls ``read_file``, which the policy allows. One run with the
  plain tools, and one with signoff's (``signoff_tools`` / ``SignoffToolset``; SQLite store
  ``synchronous=FULL``, the allowed call audited by the store's batched writer). Ratio to the
  plain tools; target ≤ 1.1, as for LangChain.
* **approve cycle**: the model calls ``delete_file``. The framework alone pauses (a bool
  ``needs_approval`` / ``requires_approval``), is approved in memory and continues. With
  signoff, the run pauses, the request is stored, an approver's decision is stored
  (``gate.adecide``), ``resolve`` / ``results`` reads it, and the approved call is claimed
  and finished on the exactly-once ledger. Ratio to the framework alone, with signoff's
  in-memory store (target ≤ 1.5, as for LangChain) and with its SQLite store (four fsynced
  commits per cycle; shown, no target).

Ratios are the median of per-round ratios (each round times every variant once, in rotating
order).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import textwrap
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks.measure import Row, Target, fmt, gc_paused, judge, mark, summarize

UNGATED_TARGET = 1.1
CYCLE_TARGET = 1.5
TARGETS = [
    Target("openai_agents.ungated.ratio_signoff_to_plain", "<=", UNGATED_TARGET, "x"),
    Target("openai_agents.approve_cycle.ratio_signoff_memory_to_sdk", "<=", CYCLE_TARGET, "x"),
    Target("pydantic_ai.ungated.ratio_signoff_to_plain", "<=", UNGATED_TARGET, "x"),
    Target("pydantic_ai.approve_cycle.ratio_signoff_memory_to_sdk", "<=", CYCLE_TARGET, "x"),
]
POLICY = """
version: 1
people:
  alice: {roles: [ops]}
tools:
  read_file: {default: allow}
  delete_file: {default: require_approval, approvers: {roles: [ops]}}
"""
APPROVE = [{"type": "approve"}]
Variant = Callable[[], Awaitable[None]]


def _gates(directory: Path) -> dict[str, Any]:
    from signoff import Gate, Policy
    from signoff.store import MemoryStore, SQLiteStore

    policy = Policy.from_yaml(textwrap.dedent(POLICY))
    return {
        "sqlite": Gate(policy, SQLiteStore(directory / "signoff.db")),
        "memory": Gate(policy, MemoryStore()),
    }


def _openai_agents(gates: dict[str, Any]) -> tuple[dict[str, Variant], dict[str, Variant]]:
    from agents import Agent, RunConfig, Runner, function_tool

    from signoff.integrations.openai_agents import aresolve, signoff_tools
    from signoff.integrations.openai_agents.testing import (
        ScriptedModel,
        calls_then_summary,
        function_call,
    )

    config = RunConfig(tracing_disabled=True)

    def tools(needs_approval: bool = False) -> list[Any]:
        @function_tool
        def read_file(path: str) -> str:
            """Read a file."""
            return f"contents of {path}"

        @function_tool(needs_approval=needs_approval)
        def delete_file(path: str) -> str:
            """Delete a file."""
            return f"deleted {path}"

        return [read_file, delete_file]

    def agent(call: str, gate: Any = None, needs_approval: bool = False) -> Any:
        model = ScriptedModel(calls_then_summary(function_call(call, {"path": "a"}, "c1")))
        plain = tools(needs_approval)
        return Agent(name="a", model=model, tools=signoff_tools(gate, plain) if gate else plain)

    def step(a: Any) -> Variant:
        async def once() -> None:
            out = await Runner.run(a, "go", run_config=config)
            _expect(out.final_output, "done: contents of a")

        return once

    def sdk_cycle(a: Any) -> Variant:
        async def once() -> None:
            paused = await Runner.run(a, "go", run_config=config)
            state = paused.to_state()
            state.approve(paused.interruptions[0])
            _expect((await Runner.run(a, state, run_config=config)).final_output, "done: deleted a")

        return once

    def signoff_cycle(a: Any, gate: Any) -> Variant:
        async def once() -> None:
            with gate.context(thread=uuid.uuid4().hex) as ctx:
                paused = await Runner.run(a, "go", run_config=config)
                req = await gate.store.find_request_by_call(ctx.thread, "c1")
                await gate.adecide(req.id, APPROVE, approver="alice")
                done = await Runner.run(a, await aresolve(paused, gate), run_config=config)
            _expect(done.final_output, "done: deleted a")

        return once

    ungated = {
        "plain": step(agent("read_file")),
        "signoff": step(agent("read_file", gates["sqlite"])),
    }
    cycles = {
        "sdk": sdk_cycle(agent("delete_file", needs_approval=True)),
        "signoff_memory": signoff_cycle(agent("delete_file", gates["memory"]), gates["memory"]),
        "signoff_sqlite": signoff_cycle(agent("delete_file", gates["sqlite"]), gates["sqlite"]),
    }
    return ungated, cycles


def _pydantic_ai(gates: dict[str, Any]) -> tuple[dict[str, Variant], dict[str, Variant]]:
    from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, FunctionToolset

    from signoff.integrations.pydantic_ai import SignoffToolset, aresults
    from signoff.integrations.pydantic_ai.testing import calls_then_summary, tool_call

    def toolset(requires_approval: bool = False) -> FunctionToolset[None]:
        found: FunctionToolset[None] = FunctionToolset()

        @found.tool_plain
        def read_file(path: str) -> str:
            """Read a file."""
            return f"contents of {path}"

        @found.tool_plain(requires_approval=requires_approval)
        def delete_file(path: str) -> str:
            """Delete a file."""
            return f"deleted {path}"

        return found

    def agent(call: str, gate: Any = None, requires_approval: bool = False) -> Any:
        model = calls_then_summary(tool_call(call, {"path": "a"}, "c1"))
        plain = toolset(requires_approval)
        tools = SignoffToolset(plain, gate) if gate else plain
        return Agent(model, toolsets=[tools], output_type=[str, DeferredToolRequests])

    def step(a: Any) -> Variant:
        async def once() -> None:
            _expect((await a.run("go")).output, "done: contents of a")

        return once

    def sdk_cycle(a: Any) -> Variant:
        async def once() -> None:
            paused = await a.run("go")
            answers = DeferredToolResults(approvals={"c1": True})
            done = await a.run(message_history=paused.all_messages(), deferred_tool_results=answers)
            _expect(done.output, "done: deleted a")

        return once

    def signoff_cycle(a: Any, gate: Any) -> Variant:
        async def once() -> None:
            paused = await a.run("go")
            from signoff.integrations.pydantic_ai import REQUEST_ID

            await gate.adecide(paused.output.metadata["c1"][REQUEST_ID], APPROVE, approver="alice")
            answers = await aresults(paused.output, gate)
            done = await a.run(message_history=paused.all_messages(), deferred_tool_results=answers)
            _expect(done.output, "done: deleted a")

        return once

    ungated = {
        "plain": step(agent("read_file")),
        "signoff": step(agent("read_file", gates["sqlite"])),
    }
    cycles = {
        "sdk": sdk_cycle(agent("delete_file", requires_approval=True)),
        "signoff_memory": signoff_cycle(agent("delete_file", gates["memory"]), gates["memory"]),
        "signoff_sqlite": signoff_cycle(agent("delete_file", gates["sqlite"]), gates["sqlite"]),
    }
    return ungated, cycles


def _expect(got: Any, want: str) -> None:
    if got != want:
        raise AssertionError(f"unexpected answer {got!r}")


async def _rounds(variants: dict[str, Variant], rounds: int, warmup: int) -> dict[str, list[float]]:
    """ms per run, each round running every variant once, starting at a rotating offset."""
    names = list(variants)
    out: dict[str, list[float]] = {n: [] for n in names}
    for i in range(warmup + rounds):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            start = time.perf_counter()
            await variants[name]()
            if i >= warmup:
                out[name].append((time.perf_counter() - start) * 1e3)
    return out


def _ratio(a: list[float], b: list[float]) -> float:
    return round(statistics.median(x / y for x, y in zip(a, b, strict=True)), 3)


async def _measure(rounds: int, warmup: int, directory: Path) -> dict[str, Any]:
    gates = _gates(directory)
    out: dict[str, Any] = {}
    try:
        for name, build in (("openai_agents", _openai_agents), ("pydantic_ai", _pydantic_ai)):
            ungated, cycles = build(gates)
            with gc_paused():
                steps = await _rounds(ungated, rounds, warmup)
                approve = await _rounds(cycles, rounds, warmup)
            out[name] = {
                "ungated": {
                    **{f"{k}_ms": summarize(v, 3) for k, v in steps.items()},
                    "ratio_signoff_to_plain": _ratio(steps["signoff"], steps["plain"]),
                },
                "approve_cycle": {
                    **{f"{k}_ms": summarize(v, 3) for k, v in approve.items()},
                    "ratio_signoff_memory_to_sdk": _ratio(
                        approve["signoff_memory"], approve["sdk"]
                    ),
                    "ratio_signoff_sqlite_to_sdk": _ratio(
                        approve["signoff_sqlite"], approve["sdk"]
                    ),
                },
            }
    finally:
        for gate in gates.values():
            await gate.aclose()
    return out


def run(quick: bool) -> dict[str, Any]:
    rounds = 30 if quick else 200
    warmup = 5 if quick else 20
    with tempfile.TemporaryDirectory(prefix="signoff-bench-agent-sdks-") as tmp:
        result = asyncio.run(_measure(rounds, warmup, Path(tmp)))
    result["method"] = (
        f"{rounds} interleaved rounds after {warmup} warm-up (ms per run / per cycle), scripted "
        "models, GC paused; ratios = median of per-round ratios; signoff's SQLite store "
        "synchronous=FULL"
    )
    return judge(result, TARGETS)


def rows(result: dict[str, Any]) -> list[Row]:
    met = result["targets_met"]
    out: list[Row] = []
    for i, (key, label) in enumerate(
        (("openai_agents", "OpenAI Agents"), ("pydantic_ai", "Pydantic AI"))
    ):
        steps, cycle = result[key]["ungated"], result[key]["approve_cycle"]
        out.append(
            Row(
                f"{label}: allowed call, signoff / plain tools",
                f"{steps['ratio_signoff_to_plain']:.3f}x",
                f"≤ {UNGATED_TARGET:g}x: {mark(met[TARGETS[2 * i].describe()])}",
                f"median {fmt(steps['signoff_ms']['median'], 'ms')} vs "
                f"{fmt(steps['plain_ms']['median'], 'ms')}",
            )
        )
        out.append(
            Row(
                f"{label}: approve cycle, signoff (in-memory store) / the SDK alone",
                f"{cycle['ratio_signoff_memory_to_sdk']:.3f}x",
                f"≤ {CYCLE_TARGET:g}x: {mark(met[TARGETS[2 * i + 1].describe()])}",
                f"median {fmt(cycle['signoff_memory_ms']['median'], 'ms')} vs "
                f"{fmt(cycle['sdk_ms']['median'], 'ms')}; SQLite store (synchronous=FULL) "
                f"{cycle['ratio_signoff_sqlite_to_sdk']:.3f}x",
            )
        )
    return out
