"""``Policy.evaluate`` µs per call, against a hand-written ``if`` chain of the same rules.

Mixed batches cycle through every case of :data:`benchmarks.fixtures.CASES`; per-case batches
repeat one case. Policy and baseline batches are interleaved so outside load hits both. GC is
off while timing (the research numbers this compares with were taken the same way).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from benchmarks import fixtures
from benchmarks.measure import (
    Row,
    Target,
    fmt,
    gc_paused,
    interleaved_batches,
    judge,
    mark,
    summarize,
)
from signoff import CallContext, Policy, ReviewSpec, ToolCall, Verdict
from signoff.model import Approvers

TARGET = Target("mixed.policy_us.median", "<=", 10.0, "µs/call")
Evaluate = Callable[[ToolCall, CallContext], Verdict]

# Research §5.1 (policy-engines.md), mixed median µs/call on the same 8 calls, idle machine.
RESEARCH_MIXED_US = {
    "hand (research)": 2.0,
    "yaml_ref reference loader (research)": 6.2,
    "simpleeval (research)": 12.6,
    "CEL common-expression-language, tuned (research)": 32.0,
    "Cedar cedarpy (research)": 121.3,
    "Rego regopy bundle (research)": 363.3,
    "casbin (research)": 456.0,
}


class HandWritten:
    """The same rules as the benchmark policy, as the ``if`` chain a careful person would write.

    It returns equivalent :class:`Verdict` objects (prebuilt for allow/deny, description
    rendered for approvals) but has none of the engine's generality: no fail-closed handling
    of missing or mistyped arguments, no risk, no rate limits, no inheritance.
    """

    def __init__(self, policy_hash: str) -> None:
        h = policy_hash
        self.deny_user1 = Verdict.deny("protect-user-1", "user #1 is protected", policy_hash=h)
        self.allow_delete = Verdict.allow("delete_record.default", policy_hash=h)
        self.allow_transfer = Verdict.allow("transfer_funds.default", policy_hash=h)
        self.allow_execute = Verdict.allow("read-only-commands", policy_hash=h)
        self.allow_read = Verdict.allow("read_*.default", policy_hash=h)
        self.dba = ReviewSpec(approvers=Approvers(roles=("dba",)), timeout_s=3600)
        self.finance = ReviewSpec(
            allowed_decisions=("approve", "edit", "reject"),
            approvers=Approvers(roles=("finance",), quorum=2),
            editable_args=("amount", "memo"),
            timeout_s=4 * 3600,
        )
        self.ops = ReviewSpec(
            allowed_decisions=("approve", "edit", "reject"),
            approvers=Approvers(roles=("ops",)),
            editable_args=("command",),
            timeout_s=900,
        )
        self.admin = ReviewSpec(approvers=Approvers(roles=("admin",)))
        self.hash = h
        self.unsafe = frozenset(";&|`$<>\\\n")
        self.read_only = frozenset(("ls", "cat", "git"))

    def _approval(self, rule: str, spec: ReviewSpec, description: str) -> Verdict:
        return Verdict(
            "require_approval", rule, review=spec, policy_hash=self.hash, description=description
        )

    def evaluate(self, call: ToolCall, ctx: CallContext) -> Verdict:
        name, args = call.name, call.args
        if name == "delete_record":
            if args["table"] == "users" and args["record_id"] == 1:
                return self.deny_user1
            if args["environment"] == "production":
                return self._approval(
                    "prod-delete",
                    self.dba,
                    f"Delete {args['table']} #{args['record_id']} in {args['environment']}",
                )
            return self.allow_delete
        if name == "transfer_funds":
            if args["amount"] > 10000:
                return self._approval(
                    "large-transfer",
                    self.finance,
                    f"Large transfer: {args['amount']} {args['currency']} to {args['to']}",
                )
            return self.allow_transfer
        if name == "execute":
            command = args["command"]
            words = command.split(None, 1)
            if words and words[0] in self.read_only and self.unsafe.isdisjoint(command):
                return self.allow_execute
            return self._approval("execute.default", self.ops, f"Shell: {command}")
        if name.startswith("read_"):
            return self.allow_read
        return self._approval(
            "defaults.unknown_tool", self.admin, f"{name} called by {ctx.principal.id}"
        )


def _check(evaluate: Evaluate, ctx: CallContext, who: str) -> None:
    for case in fixtures.CASES:
        verdict = evaluate(case.call, ctx)
        if (verdict.kind, verdict.rule) != (case.kind, case.rule):
            raise AssertionError(
                f"{who} gives {verdict.kind}/{verdict.rule} for {case.name}, "
                f"expected {case.kind}/{case.rule}"
            )


def _batch(evaluate: Evaluate, ctx: CallContext, calls: Sequence[ToolCall]) -> Callable[[], None]:
    def run_batch() -> None:
        for call in calls:
            evaluate(call, ctx)

    return run_batch


def _compare(
    policy_eval: Evaluate,
    hand_eval: Evaluate,
    ctx: CallContext,
    calls: Sequence[ToolCall],
    batches: int,
) -> dict[str, Any]:
    timings = interleaved_batches(
        {
            "policy": _batch(policy_eval, ctx, calls),
            "hand": _batch(hand_eval, ctx, calls),
        },
        calls_per_batch=len(calls),
        batches=batches,
        warmup_batches=max(5, batches // 10),
    )
    ratios = [p / h for p, h in zip(timings["policy"], timings["hand"], strict=True)]
    policy = summarize(timings["policy"])
    hand = summarize(timings["hand"])
    return {
        "policy_us": policy,
        "hand_us": hand,
        "ratio_policy_over_hand": round(float(policy["median"]) / float(hand["median"]), 2),
        "ratio_median_of_batch_ratios": summarize(ratios, 2)["median"],
    }


def run(quick: bool) -> dict[str, Any]:
    pol: Policy = fixtures.policy()
    ctx = fixtures.agent_context(pol)
    hand = HandWritten(pol.short_hash)

    _check(pol.evaluate, ctx, "Policy.evaluate")
    _check(hand.evaluate, ctx, "the hand-written baseline")

    mixed_batches = 200 if quick else 2000
    case_batches = 40 if quick else 400
    per_batch = 100
    mixed_calls = [c.call for c in fixtures.CASES] * (per_batch // len(fixtures.CASES))
    with gc_paused():
        mixed = _compare(pol.evaluate, hand.evaluate, ctx, mixed_calls, mixed_batches)
        per_case = {
            case.name: _compare(
                pol.evaluate, hand.evaluate, ctx, [case.call] * per_batch, case_batches
            )
            for case in fixtures.CASES
        }
    result: dict[str, Any] = {
        "method": (
            f"median over batches of {per_batch} calls (µs/call), GC off, policy and hand "
            f"batches interleaved; mixed = {len(fixtures.CASES)} cases in turn"
        ),
        "calls": {"mixed": mixed_batches * per_batch, "per_case": case_batches * per_batch},
        "mixed": mixed,
        "per_case": {
            name: {
                "policy_us": r["policy_us"]["median"],
                "hand_us": r["hand_us"]["median"],
                "ratio": r["ratio_policy_over_hand"],
            }
            for name, r in per_case.items()
        },
        "research_mixed_us": RESEARCH_MIXED_US,
    }
    return judge(result, [TARGET])


def rows(result: dict[str, Any]) -> list[Row]:
    mixed = result["mixed"]
    pol, hand = mixed["policy_us"], mixed["hand_us"]
    worst = max(result["per_case"].items(), key=lambda kv: kv[1]["policy_us"])
    return [
        Row(
            "policy: Policy.evaluate, mixed cases",
            f"{fmt(pol['median'], 'µs')} (p99 {fmt(pol['p99'], 'µs')})",
            f"≤ 10 µs: {mark(result['meets_target'])}",
        ),
        Row(
            "policy: hand-written if chain (same run)",
            f"{fmt(hand['median'], 'µs')} (p99 {fmt(hand['p99'], 'µs')})",
            note=f"policy/hand = {mixed['ratio_policy_over_hand']:.1f}x",
        ),
        Row(
            "policy: slowest case",
            f"{worst[0]}: {fmt(worst[1]['policy_us'], 'µs')}",
            note=f"hand {fmt(worst[1]['hand_us'], 'µs')}",
        ),
    ]
