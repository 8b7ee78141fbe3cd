"""Policy regexes on RE2: the worst patterns on a ``max_args_bytes`` argument, a request of
``max_calls_per_request`` such calls, and Python's ``re`` on the same patterns (same run).

Every time is one ``Policy.evaluate`` of a tool whose only rule is ``args.text: {matches: P}``
— the pattern found nowhere, so the whole argument is scanned — on a crafted ASCII argument
whose canonical JSON (``{"text":"…"}``) is exactly 262,144 bytes. Patterns come in three kinds:

- *classic*: the backtracking disasters of issue 11 (``(a+)+$``, ``(a|aa)+$``, a common
  e-mail regex, ``(.*a){20}``). RE2 answers them with its DFA in one pass.
- *bounded*: a counted repetition after a literal, as an operator might write it
  (``(?i)password.{0,40}[:=]``), on text full of the literal: RE2's DFA would need a state per
  set of open matches, runs out of its memory budget and falls back to its NFA — still linear
  in the text, but with a cost per byte that grows with the number of open matches.
- *adversarial*: ``a[ab]{20}c`` and ``a[ab]{999}c`` on random a/b text — the DFA blow-up on
  purpose; the NFA then carries up to 1,000 threads per byte. This is the worst single pattern
  found here (RE2 caps counts at 1,000; alternations of such patterns cost more, up to RE2's
  8 MiB program budget).

Python's ``re`` runs in a subprocess with a time limit, on an input small enough to finish
for the exponential patterns (the input size is reported), and on the full input otherwise.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.measure import Row, Target, fmt, gc_paused, judge, mark
from signoff import CallContext, Policy, ToolCall
from signoff.model import Principal
from signoff.policy.regex import compile_regex

MAX_ARGS_BYTES = 262_144  # limits.max_args_bytes default
MAX_CALLS = 100  # limits.max_calls_per_request default
TEXT_CHARS = MAX_ARGS_BYTES - len('{"text":""}')  # canonical JSON of the args = the limit
PYTHON_TIMEOUT_S = 30.0
EMAIL = r"^([a-zA-Z0-9_.+-])+@(([a-zA-Z0-9-])+\.)+([a-zA-Z0-9]{2,4})+$"
TARGETS = [
    Target("classic.worst_ms", "<=", 5.0, "ms"),
    Target("classic.request_ms", "<=", 50.0, "ms"),
    Target("worst.per_call_ms", "<=", 5.0, "ms"),
    Target("worst.request_ms", "<=", 50.0, "ms"),
]


def _repeat(unit: str, tail: str = "") -> Callable[[int], str]:
    return lambda n: (unit * n)[: n - len(tail)] + tail


def _random_ab(n: int) -> str:
    rnd = random.Random(11)
    return "".join(rnd.choice("ab") for _ in range(n))


def _password_soup(n: int) -> str:
    """``password`` over and over, 1-12 filler characters apart, never a ``:`` or ``=``."""
    rnd = random.Random(7)
    parts: list[str] = []
    size = 0
    while size < n:
        part = "password" + "".join(rnd.choice("ab x") for _ in range(rnd.randint(1, 12)))
        parts.append(part)
        size += len(part)
    return "".join(parts)[:n]


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # classic | bounded | adversarial
    pattern: str
    text: Callable[[int], str]  # the crafted argument of n characters (no match in it)
    python_chars: int | None  # Python's re input size; None: the full argument
    in_request: bool = True  # measured as a request of MAX_CALLS calls too


CASES = [
    Case("nested_plus", "classic", r"(a+)+$", _repeat("a", "!"), 22),
    Case("overlapping_alternation", "classic", r"(a|aa)+$", _repeat("a", "!"), 30),
    Case("email", "classic", EMAIL, lambda n: "a@a." + "a" * (n - 5) + "!", 44),
    Case("repeated_dot_star", "classic", r"(.*a){20}", lambda n: "a" * 19 + "b" * (n - 19), 100),
    Case("password_near_colon", "bounded", r"(?i)password.{0,40}[:=]", _password_soup, None),
    Case("dfa_blowup_20", "adversarial", r"a[ab]{20}c", _random_ab, None),
    Case("dfa_blowup_999", "adversarial", r"a[ab]{999}c", _random_ab, None, in_request=False),
]

_PYTHON_SCRIPT = """
import json, re, sys, time
pattern, text = json.loads(sys.stdin.read())
rx = re.compile(pattern)
start = time.perf_counter()
found = rx.search(text) is not None
print(json.dumps([(time.perf_counter() - start) * 1000.0, found]))
"""


def _context() -> CallContext:
    return CallContext(principal=Principal("erin", frozenset()))


def _policy(pattern: str) -> Policy:
    rule = {"id": "pattern", "when": {"args.text": {"matches": pattern}}, "decision": "deny"}
    rule["reason"] = "matched"
    return Policy.from_mapping(
        {"version": 1, "tools": {"t": {"default": "allow", "rules": [rule]}}}
    )


def _evaluate_ms(policy: Policy, calls: list[ToolCall], ctx: CallContext) -> float:
    """Wall time of evaluating ``calls`` one after another (one request's batch), in ms."""
    start = time.perf_counter()
    for call in calls:
        verdict = policy.evaluate(call, ctx)
        if verdict.kind != "allow":  # the crafted text must be scanned to the end
            raise AssertionError(f"{verdict.rule} matched the crafted text")
    return (time.perf_counter() - start) * 1000.0


def _median_ms(policy: Policy, text: str, ctx: CallContext, reps: int) -> float:
    call = ToolCall("t", {"text": text}, id="c")
    return statistics.median(_evaluate_ms(policy, [call], ctx) for _ in range(reps))


def _python_re(pattern: str, text: str) -> dict[str, Any]:
    """Python's ``re.search`` once, in a subprocess stopped after PYTHON_TIMEOUT_S."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PYTHON_SCRIPT],
            input=json.dumps([pattern, text]),
            capture_output=True,
            text=True,
            timeout=PYTHON_TIMEOUT_S,
            check=True,
        )
    except subprocess.TimeoutExpired:
        return {"chars": len(text), "ms": None, "stopped_after_s": PYTHON_TIMEOUT_S}
    ms, found = json.loads(done.stdout)
    return {"chars": len(text), "ms": round(ms, 3), "found": found}


def _case(case: Case, ctx: CallContext, quick: bool) -> dict[str, Any]:
    policy = _policy(case.pattern)
    slow = case.name == "dfa_blowup_999"
    reps = 1 if slow else (3 if quick else 15)
    full = case.text(TEXT_CHARS)
    assert len(json.dumps({"text": full}, separators=(",", ":"))) == MAX_ARGS_BYTES
    out: dict[str, Any] = {"kind": case.kind, "pattern": case.pattern}
    with gc_paused():
        _median_ms(policy, full, ctx, 1)  # warm-up
        out["per_call_ms"] = round(_median_ms(policy, full, ctx, reps), 3)
        out["by_size_ms"] = {
            str(n): round(_median_ms(policy, case.text(n), ctx, reps), 3)
            for n in (TEXT_CHARS // 4, TEXT_CHARS // 2)
        }
        out["by_size_ms"][str(TEXT_CHARS)] = out["per_call_ms"]
    small = case.text(case.python_chars) if case.python_chars else full
    out["python_re"] = _python_re(case.pattern, small)
    if case.python_chars:
        rx = compile_regex(case.pattern)
        start = time.perf_counter()
        rx.search(small)
        out["re2_on_python_input_ms"] = round((time.perf_counter() - start) * 1000.0, 4)
    return out


def _request(case: Case, ctx: CallContext, quick: bool) -> dict[str, Any]:
    """``MAX_CALLS`` calls of one request, each with a crafted 256 KiB argument, in a row.

    Median of 5 requests where one takes under a second (1 otherwise, and in quick mode)."""
    calls_run = 10 if quick else MAX_CALLS
    policy = _policy(case.pattern)
    text = case.text(TEXT_CHARS)  # the same crafted text in every call of the request
    calls = [ToolCall("t", {"text": text}, id=f"c{i}") for i in range(calls_run)]
    with gc_paused():
        runs = [_evaluate_ms(policy, calls, ctx)]
        while not quick and len(runs) < 5 and runs[0] < 1000.0:
            runs.append(_evaluate_ms(policy, calls, ctx))
    return {
        "calls_run": calls_run,
        "requests_run": len(runs),
        "request_ms": round(statistics.median(runs) * MAX_CALLS / calls_run, 1),
        "scaled_from_calls": calls_run if calls_run != MAX_CALLS else None,
    }


def run(quick: bool) -> dict[str, Any]:
    ctx = _context()
    cases = {c.name: _case(c, ctx, quick) for c in CASES}
    requests = {c.name: _request(c, ctx, quick) for c in CASES if c.in_request}
    classic = [n for n, r in cases.items() if r["kind"] == "classic"]
    worst_classic = max(classic, key=lambda n: cases[n]["per_call_ms"])
    worst = max(cases, key=lambda n: cases[n]["per_call_ms"])
    worst_request = max(requests, key=lambda n: requests[n]["request_ms"])
    result: dict[str, Any] = {
        "method": (
            f"Policy.evaluate with one matches rule on a crafted {MAX_ARGS_BYTES:,}-byte "
            "argument (canonical JSON), no match; median of 15 runs (3 quick; 1 for "
            f"dfa_blowup_999), GC off; request = {MAX_CALLS} such calls evaluated in a row, "
            "median of 5 requests if one takes < 1 s (quick: 10 calls, scaled); Python's re "
            "in a subprocess, once, capped at "
            f"{PYTHON_TIMEOUT_S:g} s, on python_re.chars characters"
        ),
        "cases": cases,
        "requests": requests,
        "classic": {
            "worst": worst_classic,
            "worst_ms": cases[worst_classic]["per_call_ms"],
            "request_ms": max(requests[n]["request_ms"] for n in classic),
        },
        "worst": {
            "pattern": cases[worst]["pattern"],
            "per_call_ms": cases[worst]["per_call_ms"],
            "request_pattern": cases[worst_request]["pattern"],
            "request_ms": requests[worst_request]["request_ms"],
        },
    }
    return judge(result, TARGETS)


def _python_note(case: dict[str, Any]) -> str:
    py = case["python_re"]
    stopped = f"> {py.get('stopped_after_s', 0):g} s (stopped)"
    took = stopped if py["ms"] is None else fmt(py["ms"], "ms")
    where = "the same input" if py["chars"] >= TEXT_CHARS else f"{py['chars']} chars"
    re2 = case.get("re2_on_python_input_ms")
    mine = f" (RE2 there: {fmt(re2, 'ms', 3)})" if re2 is not None else ""
    return f"Python re on {where}: {took}{mine}"


def _cell(pattern: str) -> str:
    return pattern.replace("|", "\\|")  # a Markdown table cell


def rows(result: dict[str, Any]) -> list[Row]:
    met = result["targets_met"]
    out = []
    for case in result["cases"].values():
        sizes = case["by_size_ms"]
        quarter, half = (sizes[k] for k in list(sizes)[:2])
        out.append(
            Row(
                f"regex ({case['kind']}): `{_cell(case['pattern'])}` on 256 KiB",
                fmt(case["per_call_ms"], "ms", 3),
                "",
                f"64/128 KiB: {fmt(quarter, 'ms', 3)} / {fmt(half, 'ms', 3)}; "
                + _python_note(case),
            )
        )
    classic, worst = result["classic"], result["worst"]
    out += [
        Row(
            "regex: worst classic ReDoS pattern, one 256 KiB call",
            fmt(classic["worst_ms"], "ms", 3),
            f"≤ 5 ms: {mark(met[TARGETS[0].describe()])}",
            classic["worst"],
        ),
        Row(
            f"regex: classic, request of {MAX_CALLS} calls of 256 KiB",
            fmt(classic["request_ms"], "ms", 1),
            f"≤ 50 ms: {mark(met[TARGETS[1].describe()])}",
            "; ".join(
                f"{case['kind']} `{_cell(case['pattern'])}`: {fmt(req['request_ms'], 'ms', 1)}"
                for name, req in result["requests"].items()
                if (case := result["cases"][name])["kind"] == "bounded"
            ),
        ),
        Row(
            "regex: worst pattern found, one 256 KiB call",
            fmt(worst["per_call_ms"], "ms", 1),
            f"≤ 5 ms: {mark(met[TARGETS[2].describe()])}",
            f"`{_cell(worst['pattern'])}` (RE2's NFA fallback; linear in the text)",
        ),
        Row(
            f"regex: worst request of {MAX_CALLS} calls measured",
            fmt(worst["request_ms"], "ms", 1),
            f"≤ 50 ms: {mark(met[TARGETS[3].describe()])}",
            f"`{_cell(worst['request_pattern'])}`",
        ),
    ]
    return out
