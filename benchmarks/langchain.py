"""LangChain agents: ``SignoffMiddleware`` vs LangChain's ``HumanInTheLoopMiddleware``.

One scripted agent (``ScriptedChatModel``: the user's message → one tool call → tool
result → a final answer), the same tool calls, ``InMemorySaver`` for every variant, in one
run with the variants interleaved round by round (so a burst of outside load hits all of
them). Two measurements:

* **ungated step** — the model calls ``read_file``, which no variant gates: one
  ``invoke`` (model → tool → model) with no middleware, with LangChain's middleware and
  with signoff's (interrupt mode, SQLite store ``synchronous=FULL``: the allowed call is
  audited, by the store's batched writer thread). Ratio to no middleware; target ≤ 1.1.
  signoff with its in-memory store shows the middleware's own share.
* **approve cycle** — the model calls ``delete_file``, gated by both: ``invoke`` → pause →
  ``Command(resume={"decisions": [{"type": "approve"}]})`` → tool → final answer.
  LangChain keeps the pause in the checkpoint only; signoff also stores the request,
  the decision and the exactly-once execution ledger durably in SQLite (``synchronous=FULL``,
  hash-chained audit rows: four fsynced commits per cycle, the last — ``executed`` —
  committing while the agent's next step runs). Ratio to LangChain; target
  ≤ 1.5. Measured twice: with ``InMemorySaver`` (LangChain keeps nothing durable) and with
  a file ``SqliteSaver`` (both survive a restart — the like-for-like comparison). signoff
  with ``synchronous=NORMAL`` (no fsync per commit; safe against a process crash, not a
  power cut) and with its in-memory store are shown to locate the cost.

Ratios are the median of per-round ratios (each round times every variant once, in
rotating order), which holds up better than a ratio of medians on a loaded machine.
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.measure import Row, Target, fmt, gc_paused, judge, mark, summarize

# Issue #13: the documented swap (default, in-memory signoff store) against LangChain, both
# on InMemorySaver; and both durable (file SqliteSaver + signoff's SQLite store).
UNGATED_TARGET = 1.1
CYCLE_TARGET = 1.5
DURABLE_TARGET = 1.4
TARGETS = [
    Target("ungated.ratio_signoff_to_none", "<=", UNGATED_TARGET, "x"),
    Target("approve_cycle.ratio_signoff_memory_to_langchain", "<=", CYCLE_TARGET, "x"),
    Target("approve_cycle.ratio_with_sqlitesaver", "<=", DURABLE_TARGET, "x"),
]


def _agents(directory: Path) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
    import sqlite3

    from langchain.agents import create_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    from signoff.integrations.langchain import SignoffMiddleware
    from signoff.integrations.langchain.testing import (
        ScriptedChatModel,
        calls_then_summary,
        tool_call,
    )
    from signoff.store import MemoryStore, SQLiteStore

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    def agent(call: dict[str, Any], middleware: list[Any], durable: str = "") -> Any:
        model = ScriptedChatModel(script=calls_then_summary(call))
        saver: Any = InMemorySaver()
        if durable:
            conn = sqlite3.connect(directory / f"{durable}.db", check_same_thread=False)
            saver = SqliteSaver(conn)
        tools = [read_file, delete_file]
        return create_agent(model, tools=tools, middleware=middleware, checkpointer=saver)

    gated = {"delete_file": True}
    sqlite = SignoffMiddleware(gated, store=SQLiteStore(directory / "signoff.db"))
    normal = SignoffMiddleware(
        gated, store=SQLiteStore(directory / "normal.db", synchronous="NORMAL")
    )
    memory = SignoffMiddleware(gated, store=MemoryStore())
    read = tool_call("read_file", {"path": "a.txt"}, "call_1")
    delete = tool_call("delete_file", {"path": "b.txt"}, "call_1")
    ungated = {
        "none": agent(read, []),
        "langchain": agent(read, [HumanInTheLoopMiddleware(gated)]),
        "signoff": agent(read, [sqlite]),
        "signoff_memory": agent(read, [memory]),
    }
    cycles = {
        "langchain": agent(delete, [HumanInTheLoopMiddleware(gated)]),
        "signoff_sqlite": agent(delete, [sqlite]),
        "signoff_memory": agent(delete, [memory]),
        "signoff_sqlite_normal": agent(delete, [normal]),
        "langchain_sqlitesaver": agent(delete, [HumanInTheLoopMiddleware(gated)], "lc"),
        "signoff_sqlite_sqlitesaver": agent(delete, [sqlite], "so"),
    }
    return ungated, cycles, [sqlite, normal, memory]


def _step(agent: Any) -> None:
    from langchain_core.messages import HumanMessage

    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    out = agent.invoke({"messages": [HumanMessage("go")]}, config)
    if out["messages"][-1].content != "done: contents of a.txt":
        raise AssertionError(f"unexpected answer {out['messages'][-1].content!r}")


def _cycle(agent: Any) -> None:
    from langchain_core.messages import HumanMessage
    from langgraph.types import Command

    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    paused = agent.invoke({"messages": [HumanMessage("go")]}, config, version="v2")
    if len(paused.interrupts) != 1:
        raise AssertionError("the agent did not pause for approval")
    done = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config, version="v2")
    if done.value["messages"][-1].content != "done: deleted b.txt":
        raise AssertionError(f"unexpected answer {done.value['messages'][-1].content!r}")


def _rounds(
    variants: dict[str, Any], run_one: Callable[[Any], None], rounds: int, warmup: int
) -> dict[str, list[float]]:
    """ms per run, each round running every variant once, starting at a rotating offset."""
    names = list(variants)
    out: dict[str, list[float]] = {n: [] for n in names}
    for i in range(warmup + rounds):
        order = names[i % len(names) :] + names[: i % len(names)]
        for name in order:
            start = time.perf_counter()
            run_one(variants[name])
            if i >= warmup:
                out[name].append((time.perf_counter() - start) * 1e3)
    return out


def _paired_ratio(a: list[float], b: list[float]) -> float:
    return round(statistics.median(x / y for x, y in zip(a, b, strict=True)), 3)


def run(quick: bool) -> dict[str, Any]:
    rounds = 40 if quick else 300
    warmup = 5 if quick else 30
    with tempfile.TemporaryDirectory(prefix="signoff-bench-langchain-") as tmp:
        ungated, cycles, middlewares = _agents(Path(tmp))
        try:
            with gc_paused():
                steps = _rounds(ungated, _step, rounds, warmup)
                approve = _rounds(cycles, _cycle, rounds, warmup)
        finally:
            for middleware in middlewares:
                middleware.close()
    result: dict[str, Any] = {
        "method": (
            f"{rounds} interleaved rounds after {warmup} warm-up (ms per invoke / per cycle), "
            "ScriptedChatModel, InMemorySaver, fresh thread per run, GC paused; ratios = "
            "median of per-round ratios; signoff store: SQLite synchronous=FULL"
        ),
        "ungated": {
            **{f"{k}_ms": summarize(v, 3) for k, v in steps.items()},
            "ratio_signoff_to_none": _paired_ratio(steps["signoff"], steps["none"]),
            "ratio_langchain_to_none": _paired_ratio(steps["langchain"], steps["none"]),
            "ratio_signoff_memory_to_none": _paired_ratio(steps["signoff_memory"], steps["none"]),
        },
        "approve_cycle": {
            **{f"{k}_ms": summarize(v, 3) for k, v in approve.items()},
            "ratio_signoff_sqlite_to_langchain": _paired_ratio(
                approve["signoff_sqlite"], approve["langchain"]
            ),
            "ratio_signoff_memory_to_langchain": _paired_ratio(
                approve["signoff_memory"], approve["langchain"]
            ),
            "ratio_signoff_sqlite_normal_to_langchain": _paired_ratio(
                approve["signoff_sqlite_normal"], approve["langchain"]
            ),
            "ratio_with_sqlitesaver": _paired_ratio(
                approve["signoff_sqlite_sqlitesaver"], approve["langchain_sqlitesaver"]
            ),
        },
    }
    return judge(result, TARGETS)


def rows(result: dict[str, Any]) -> list[Row]:
    met = result["targets_met"]
    steps, cycle = result["ungated"], result["approve_cycle"]
    return [
        Row(
            "langchain: ungated step, signoff / no middleware",
            f"{steps['ratio_signoff_to_none']:.3f}x",
            f"≤ {UNGATED_TARGET:g}x: {mark(met[TARGETS[0].describe()])}",
            f"median {fmt(steps['signoff_ms']['median'], 'ms')} vs "
            f"{fmt(steps['none_ms']['median'], 'ms')}; in-memory store "
            f"{steps['ratio_signoff_memory_to_none']:.3f}x; LangChain's middleware "
            f"{steps['ratio_langchain_to_none']:.3f}x",
        ),
        Row(
            "langchain: approve cycle, signoff (default in-memory store) / LangChain",
            f"{cycle['ratio_signoff_memory_to_langchain']:.3f}x",
            f"≤ {CYCLE_TARGET:g}x: {mark(met[TARGETS[1].describe()])}",
            f"both on InMemorySaver; median {fmt(cycle['signoff_memory_ms']['median'], 'ms')} "
            f"vs {fmt(cycle['langchain_ms']['median'], 'ms')}; signoff's SQLite store "
            f"(synchronous=FULL) {cycle['ratio_signoff_sqlite_to_langchain']:.3f}x, NORMAL "
            f"{cycle['ratio_signoff_sqlite_normal_to_langchain']:.3f}x",
        ),
        Row(
            "langchain: approve cycle, both durable (file SqliteSaver + SQLite store)",
            f"{cycle['ratio_with_sqlitesaver']:.3f}x",
            f"≤ {DURABLE_TARGET:g}x: {mark(met[TARGETS[2].describe()])}",
            f"median {fmt(cycle['signoff_sqlite_sqlitesaver_ms']['median'], 'ms')} vs "
            f"{fmt(cycle['langchain_sqlitesaver_ms']['median'], 'ms')}: both survive a restart",
        ),
    ]
