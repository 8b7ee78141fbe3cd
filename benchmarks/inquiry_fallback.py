"""Inquiries with a fallback judge (issue #16 part 2): what the ``inquiries:`` section costs.

CPU time of this process (``time.process_time``), on a SQLite file store, rounds interleaved:

- *create*: ``gate.aask(wait=False)`` of one question in a gate with ``inquiries.fallback``
  vs one without the section: stamping the fallback time (ratio ≈ 1 expected);
- *answer*: the fallback's own work for one due inquiry — the claim (one conditional write)
  and the judge's answer recorded (a second write) with a ``kind: python`` judge that answers
  at once — vs a human's ``respond`` decision (``gate.adecide``, one write) on the same store.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from benchmarks.measure import Row, Target, fmt, judge, mark
from signoff import Gate, Policy
from signoff.model import ApprovalRequest

TARGETS = [Target("create.ratio", "<=", 1.1, "x")]

JUDGES = """
version: 1
judges:
  fast:
    kind: python
    function: "benchmarks.inquiry_fallback:first_choice"
    timeout: 5s
"""


def first_choice(inquiry: Any, ctx: Any) -> str:
    return str(inquiry.choices[0])


def run(quick: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        return judge(asyncio.run(_measure(Path(tmp), quick)), TARGETS)


def _gate(directory: Path, name: str, section: str) -> Gate:
    text = textwrap.dedent(JUDGES) + section + f"store: sqlite:///{directory / name}.db\n"
    return Gate(Policy.from_yaml(text))


async def _measure(directory: Path, quick: bool) -> dict[str, Any]:
    rounds = 30 if quick else 200
    per_round = 10
    # after: 59m keeps the sweeper away; the answer rounds drive the fallback by hand
    with_fb = _gate(directory, "with", "inquiries:\n  fallback: {judge: fast, after: 59m}\n")
    without = _gate(directory, "without", "")
    await with_fb.astart()
    await without.astart()
    create: dict[str, list[float]] = {"with": [], "without": []}
    answer: dict[str, list[float]] = {"judge": [], "human": []}
    clock = time.process_time
    try:
        for i in range(rounds + 3):
            for name, gate in (("with", with_fb), ("without", without)):
                t0 = clock()
                made = [await _ask(gate, f"q{i}-{j}") for j in range(per_round)]
                t1 = clock()
                if i >= 3:
                    create[name].append((t1 - t0) * 1e6 / per_round)
                if name == "with":
                    t0 = clock()
                    for req in made:
                        await _fallback(with_fb, req)
                    t1 = clock()
                    if i >= 3:
                        answer["judge"].append((t1 - t0) * 1e6 / per_round)
                else:
                    t0 = clock()
                    for req in made:
                        decision = [{"type": "respond", "message": "eu"}]
                        await gate.adecide(req.id, decision, approver="bench")
                    t1 = clock()
                    if i >= 3:
                        answer["human"].append((t1 - t0) * 1e6 / per_round)
    finally:
        await with_fb.aclose()
        await without.aclose()
    ratios = [a / b for a, b in zip(create["with"], create["without"], strict=True)]
    judge_us = statistics.median(answer["judge"])
    human_us = statistics.median(answer["human"])
    return {
        "method": (
            f"{rounds} interleaved rounds of {per_round} inquiries; process CPU time; SQLite "
            "file stores; python judge answering at once; medians"
        ),
        "create": {
            "with_fallback_us": round(statistics.median(create["with"]), 1),
            "without_us": round(statistics.median(create["without"]), 1),
            "ratio": round(statistics.median(ratios), 3),
        },
        "answer": {
            "judge_us": round(judge_us, 1),
            "human_us": round(human_us, 1),
            "ratio": round(judge_us / human_us, 3),
        },
    }


async def _ask(gate: Gate, question: str) -> ApprovalRequest:
    req = await gate.aask(question, choices=["eu", "us"], timeout=3600, wait=False)
    assert isinstance(req, ApprovalRequest)
    return req


async def _fallback(gate: Gate, req: ApprovalRequest) -> None:
    """What the sweeper does for a due fallback: claim it, ask the judge, record the answer."""
    assert req.fallback is not None
    due = req.model_copy(
        update={"fallback": req.fallback.model_copy(update={"at": req.created_at})}
    )
    claim = gate.inquiry_judges.claim
    tr = await gate.update(req.id, lambda r: claim(r.model_copy(update={"fallback": due.fallback})))
    assert tr.changed
    await gate.after_change(tr)
    await gate.inquiry_judges.answer(tr.request)
    assert (await gate.get(req.id)).calls[0].resolved_by == "judge:fast"


def rows(result: dict[str, Any]) -> list[Row]:
    met = result["targets_met"]
    c, a = result["create"], result["answer"]
    return [
        Row(
            "inquiry: create with inquiries.fallback / without",
            f"{c['ratio']:.3f}x",
            f"≤ 1.1x: {mark(met[TARGETS[0].describe()])}",
            f"{fmt(c['with_fallback_us'], 'µs')} vs {fmt(c['without_us'], 'µs')} CPU",
        ),
        Row(
            "inquiry: fallback answer (claim + judge + record) / human respond",
            f"{a['ratio']:.2f}x",
            "",
            f"{fmt(a['judge_us'], 'µs')} vs {fmt(a['human_us'], 'µs')} CPU",
        ),
    ]
