"""``signoff policy explain``: the verdict plus how the policy reached it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from signoff.model import Approvers, ReviewSpec, Verdict

Lookup = Literal["exact", "glob", "unknown"]
StepOutcome = Literal["matched", "no match", "error", "not evaluated"]


@dataclass(frozen=True, slots=True)
class RuleStep:
    """One rule in evaluation order and what happened to it for this call."""

    rule: str
    decision: str
    outcome: StepOutcome
    error: str | None = None
    path: str = ""
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "decision": self.decision,
            "outcome": self.outcome,
            "error": self.error,
            "path": self.path,
            "line": self.line,
        }


@dataclass(slots=True)
class Explanation:
    """Which ``tools:`` entry matched (and how), each rule tried, and the final verdict."""

    tool: str
    lookup: Lookup = "unknown"
    entry: str | None = None
    entry_path: str | None = None
    entry_line: int | None = None
    steps: list[RuleStep] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    verdict: Verdict | None = None

    @property
    def final_rule(self) -> str:
        return self.verdict.rule if self.verdict is not None else ""

    def lines(self) -> list[str]:
        """The trace as readable lines, for the terminal."""
        where = {"exact": "exact entry", "glob": "glob entry", "unknown": "no entry"}[self.lookup]
        out = [f"tool {self.tool}: {where}" + (f" {self.entry!r}" if self.entry else "")]
        for step in self.steps:
            at = f", line {step.line}" if step.line else ""
            error = f": {step.error}" if step.error else ""
            out.append(f"{step.rule} ({step.decision}{at}): {step.outcome}{error}")
        out.extend(self.notes)
        out.append(f"final rule: {self.final_rule}")
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for ``signoff policy explain --json``)."""
        return {
            "tool": self.tool,
            "lookup": self.lookup,
            "entry": self.entry,
            "entry_path": self.entry_path,
            "entry_line": self.entry_line,
            "steps": [s.to_dict() for s in self.steps],
            "notes": list(self.notes),
            "trace": self.lines(),
            "final_rule": self.final_rule,
            "verdict": verdict_to_dict(self.verdict) if self.verdict is not None else None,
        }


def verdict_to_dict(verdict: Verdict) -> dict[str, Any]:
    """Every field of a verdict, JSON-ready (approvers and review spelled out)."""
    out: dict[str, Any] = {
        "verdict": verdict.kind,
        "rule": verdict.rule,
        "reason": verdict.reason,
        "risk": verdict.risk,
        "description": verdict.description,
        "policy_hash": verdict.policy_hash,
        "errors": list(verdict.errors),
        "review": None,
    }
    if verdict.judgement is not None:
        out["intent"] = verdict.judgement.to_wire()
    review = verdict.review
    if review is not None:
        out["review"] = {
            "allowed_decisions": list(review.allowed_decisions),
            "editable_args": review.editable_args
            if review.editable_args == "*"
            else list(review.editable_args),
            "approvers": review.approvers.to_wire(),
            "forbid_self_approval": review.forbid_self_approval,
            "allow_thread_approval": review.allow_thread_approval,
            "risk": review.risk,
            "timeout_s": review.timeout_s,
            "on_timeout": review.on_timeout,
            "escalate_to": review.escalate_to.to_wire() if review.escalate_to else None,
            "escalate_after_s": review.escalate_after_s,
            "description": review.description,
            "notify": list(review.notify),
        }
        if review.approvers.chained:
            out["review"]["chain"] = chain_lines(review)
    return out


def _who(group: Approvers) -> str:
    names = [*(f"role {r}" for r in group.roles), *(f"user {u}" for u in group.users)]
    who = "anyone" if group.any else " or ".join(names)
    return f"{group.quorum} of {who}" if group.quorum != 1 else who


def chain_lines(review: ReviewSpec) -> list[str]:
    """An approval chain, one line per stage or group, with each stage's deadline handling
    (its own, or the review's it inherits)."""
    approvers = review.approvers
    distinct = "a person counts once" if approvers.distinct else "a person may count in several"
    if approvers.all_of:
        head = f"all of {len(approvers.all_of)} groups, in any order ({distinct}):"
        return [head, *(f"  group {i + 1}: {_who(g)}" for i, g in enumerate(approvers.all_of))]
    out = [f"{len(approvers.stages)} stages, one after the other ({distinct}):"]
    for i, stage in enumerate(approvers.stages):
        timeout = stage.timeout_s if stage.timeout_s is not None else review.timeout_s
        on_timeout = stage.on_timeout or review.on_timeout
        escalate_to = stage.escalate_to if stage.on_timeout else review.escalate_to
        then = f"on_timeout {on_timeout}"
        if on_timeout == "escalate" and escalate_to is not None:
            then += f" to {_who(escalate_to)}"
        out.append(f"  stage {i + 1}: {_who(stage)}; deadline {timeout:g}s after it starts, {then}")
    return out
