"""Policy tests as data: ``signoff policy test CASES.yaml`` runs :func:`run_cases`.

A case names a call (tool, args, principal, context, risk) and the verdict it must get. A
policy change that breaks a case is caught before it reaches an agent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from signoff.model import (
    ANONYMOUS,
    RISK_LEVELS,
    VERDICT_KINDS,
    CallContext,
    PolicyError,
    Principal,
    Risk,
    ToolCall,
    Verdict,
)
from signoff.model.intent import INTENT_VERDICTS, IntentVerdict, Judgement
from signoff.model.judging import tighten
from signoff.policy.source import Loc, Problems, parse_yaml

if TYPE_CHECKING:
    from signoff.policy.engine import Policy

CASE_KEYS = (
    "name", "tool", "args", "principal", "context", "risk", "rate_count", "judge", "expect",
)  # fmt: skip
EXPECT_KEYS = ("verdict", "rule", "reason", "quorum", "roles", "users", "risk")
CONTEXT_FIELDS = ("thread", "agent", "environment", "time", "user_request", "reasoning")


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One case's outcome: ``passed``, what was expected, the verdict got, and each mismatch."""

    name: str
    passed: bool
    expected: dict[str, Any]
    got: Verdict
    problems: list[str] = field(default_factory=list)
    line: int | None = None


@dataclass(frozen=True, slots=True)
class _Case:
    name: str
    call: ToolCall
    ctx: CallContext
    risk: Risk | None
    rate_count: int | None
    expect: dict[str, Any]
    line: int | None
    judge: tuple[IntentVerdict, str] | None = None  # a stubbed intent judge's answer


class _FixedCounter:
    """A rate counter that always answers the case's ``rate_count``."""

    def __init__(self, count: int) -> None:
        self._count = count

    def count(self, tool: str, by: str, key: str, window_s: float, now: datetime) -> int:
        return self._count


def run_cases(policy: Policy, path: str | os.PathLike[str]) -> list[CaseResult]:
    """Load a cases file and run every case against ``policy``.

    Raises PolicyError (with path and line) when the cases file itself is malformed.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(f"cannot read the cases file: {exc}", path=str(file)) from None
    data, src = parse_yaml(text, file.name)
    cases = _load_cases(data, Loc(src), policy)
    return [_run(policy, case) for case in cases]


def _run(policy: Policy, case: _Case) -> CaseResult:
    rates = _FixedCounter(case.rate_count) if case.rate_count is not None else None
    got = policy.evaluate(case.call, case.ctx, risk=case.risk, rates=rates)
    intent = got.intent
    if intent is not None:  # judges are never called here: a case stubs the answer
        if case.judge is None:
            got = replace(got, intent=None)  # no stub: the policy's own verdict
        else:
            verdict, reason = case.judge
            got = tighten(got, Judgement(intent.judge, verdict, reason), case.call)
    problems = _compare(case.expect, got)
    return CaseResult(case.name, not problems, case.expect, got, problems, case.line)


def _compare(expect: dict[str, Any], got: Verdict) -> list[str]:
    problems: list[str] = []
    if got.kind != expect["verdict"]:
        why = f": {got.reason}" if got.reason else ""
        problems.append(
            f"verdict: expected {expect['verdict']}, got {got.kind} (rule {got.rule}{why})"
        )
    if "rule" in expect and got.rule != expect["rule"]:
        problems.append(f"rule: expected {expect['rule']!r}, got {got.rule!r}")
    if "reason" in expect and expect["reason"] not in (got.reason or ""):
        problems.append(f"reason: expected to contain {expect['reason']!r}, got {got.reason!r}")
    if "risk" in expect and got.risk != expect["risk"]:
        problems.append(f"risk: expected {expect['risk']!r}, got {got.risk!r}")
    approvers = got.review.approvers if got.review is not None else None
    if "quorum" in expect:
        quorum = approvers.quorum if approvers is not None else None
        if quorum != expect["quorum"]:
            problems.append(f"quorum: expected {expect['quorum']}, got {quorum}")
    for key in ("roles", "users"):
        if key in expect:
            have = sorted(getattr(approvers, key)) if approvers is not None else None
            if have != sorted(expect[key]):
                problems.append(f"{key}: expected {sorted(expect[key])}, got {have}")
    return problems


# ---------------------------------------------------------------- parsing the cases file


def _load_cases(data: object, root: Loc, policy: Policy) -> list[_Case]:
    problems = Problems()
    if not isinstance(data, Mapping) or not isinstance(data.get("cases"), list):
        raise root.error("a cases file is a mapping with `cases:`, a list of cases")
    extra = [str(k) for k in data if k != "cases"]
    if extra:
        problems.add(root.key(extra[0]), f"unknown key(s) {extra}; allowed: ['cases']")
    cases: list[_Case] = []
    for i, item in enumerate(data["cases"]):
        case = _case(item, root.key("cases").item(i), i, policy, problems)
        if case is not None:
            cases.append(case)
    problems.raise_if_any()
    return cases


def _case(item: object, loc: Loc, i: int, policy: Policy, problems: Problems) -> _Case | None:
    if not isinstance(item, Mapping):
        problems.add(loc, "a case is a mapping with tool, args and expect")
        return None
    unknown = sorted(str(k) for k in item if k not in CASE_KEYS)
    if unknown:
        problems.add(loc.key(unknown[0]), f"unknown key(s) {unknown}; allowed: {list(CASE_KEYS)}")
        return None
    try:
        name = item.get("name", f"case {i + 1}")
        tool = item.get("tool")
        if not isinstance(tool, str) or not tool:
            raise loc.key("tool").error("tool is the name of the tool called, like transfer_funds")
        args = item.get("args", {})
        if not isinstance(args, Mapping):
            raise loc.key("args").error("args is a mapping of argument name to value")
        principal = _principal(item.get("principal"), loc.key("principal"), policy)
        ctx = _context(item.get("context"), loc.key("context"), principal)
        risk = item.get("risk")
        if risk is not None and risk not in RISK_LEVELS:
            raise loc.key("risk").error(f"risk must be one of {list(RISK_LEVELS)}, got {risk!r}")
        rate_count = item.get("rate_count")
        if rate_count is not None and (
            isinstance(rate_count, bool) or not isinstance(rate_count, int) or rate_count < 0
        ):
            raise loc.key("rate_count").error("rate_count is an integer >= 0")
        expect = _expect(item.get("expect"), loc.key("expect"))
        judge = _judge(item.get("judge"), loc.key("judge"))
    except PolicyError as exc:
        problems.add_policy_error(exc)
        return None
    call = ToolCall(tool, dict(args), id=f"case-{i + 1}")
    return _Case(str(name), call, ctx, risk, rate_count, expect, loc.line, judge)


def _judge(value: object, loc: Loc) -> tuple[IntentVerdict, str] | None:
    """``judge: {verdict: mismatch, reason: ...}``: what the intent judge answers here."""
    if value is None:
        return None
    if (
        not isinstance(value, Mapping)
        or value.get("verdict") not in INTENT_VERDICTS
        or any(k not in ("verdict", "reason") for k in value)
    ):
        raise loc.error(
            f"judge is {{verdict: one of {list(INTENT_VERDICTS)}, reason: text}}, got {value!r}"
        )
    return value["verdict"], str(value.get("reason", "stubbed"))


def _principal(value: object, loc: Loc, policy: Policy) -> Principal:
    if value is None:
        return policy.principal(ANONYMOUS)
    if isinstance(value, str):
        return policy.principal(value)
    if isinstance(value, Mapping) and isinstance(value.get("id"), str):
        roles = value.get("roles", [])
        extra = [k for k in value if k not in ("id", "roles")]
        if not extra and isinstance(roles, list) and all(isinstance(r, str) for r in roles):
            return policy.principal(value["id"], roles)
    raise loc.error("principal is a person id (erin) or {id: erin, roles: [finance]}")


def _context(value: object, loc: Loc, principal: Principal) -> CallContext:
    if value is None:
        return CallContext(principal=principal)
    if not isinstance(value, Mapping):
        raise loc.error("context is a mapping like {environment: prod, agent: bot, thread: t1}")
    known: dict[str, Any] = {}
    attrs: dict[str, Any] = {}
    for key, item in value.items():
        if key == "time":
            known["time"] = _time(item, loc.key("time"))
        elif key in CONTEXT_FIELDS:
            if not isinstance(item, str):
                raise loc.key(key).error(f"context.{key} is a string, got {item!r}")
            known[key] = item
        else:
            attrs[str(key)] = item
    return CallContext(principal=principal, attrs=attrs, **known)


def _time(value: object, loc: Loc) -> datetime:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise loc.error(
                f"time is ISO 8601 like 2026-11-20T10:00:00+00:00, got {value!r}"
            ) from None
    if not isinstance(value, datetime):
        raise loc.error(f"time is ISO 8601 like 2026-11-20T10:00:00+00:00, got {value!r}")
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _expect(value: object, loc: Loc) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise loc.error("expect is a mapping like {verdict: deny, rule: protect-user-1}")
    unknown = sorted(str(k) for k in value if k not in EXPECT_KEYS)
    if unknown:
        raise loc.key(unknown[0]).error(f"unknown key(s) {unknown}; allowed: {list(EXPECT_KEYS)}")
    if value.get("verdict") not in VERDICT_KINDS:
        raise loc.key("verdict").error(
            f"expect.verdict must be one of {list(VERDICT_KINDS)}, got {value.get('verdict')!r}"
        )
    for key in ("rule", "reason"):
        if key in value and not isinstance(value[key], str):
            raise loc.key(key).error(f"expect.{key} is a string")
    quorum = value.get("quorum")
    if "quorum" in value and (isinstance(quorum, bool) or not isinstance(quorum, int)):
        raise loc.key("quorum").error("expect.quorum is an integer")
    for key in ("roles", "users"):
        items = value.get(key)
        if key in value and not (
            isinstance(items, list) and all(isinstance(r, str) for r in items)
        ):
            raise loc.key(key).error(f"expect.{key} is a list of names")
    return dict(value)
