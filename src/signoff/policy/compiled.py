"""The compiled policy the hot path walks: outcomes, rules and tool entries.

Everything here is built once at load. An :class:`Outcome` holds a finished verdict (or
everything needed to finish one), so evaluating a call is a few closure calls plus, for
approvals and denials, rendering one description.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from signoff.model import CallContext, ReviewSpec, Risk, ToolCall, Verdict, VerdictKind
from signoff.policy.conditions import Cond
from signoff.policy.rates import RateBy
from signoff.policy.review import Resolved
from signoff.policy.templates import Template

RISK_RANK: Final[dict[str | None, int]] = {
    None: -1,
    "low": 0,
    "medium": 1,
    "high": 2,
    "critical": 3,
}


def higher_risk(a: Risk | None, b: Risk | None) -> Risk | None:
    """The higher of two risks; raises KeyError for a value that is not a risk level."""
    return a if RISK_RANK[a] >= RISK_RANK[b] else b


class Outcome:
    """What a decision point (a rule, a default, on_error…) returns, ready to be stamped."""

    __slots__ = (
        "_allow",
        "_constant",
        "description",
        "intent",
        "kind",
        "policy_hash",
        "reason",
        "risk",
        "rule",
        "spec",
    )

    def __init__(
        self,
        kind: VerdictKind,
        rule: str,
        resolved: Resolved,
        policy_hash: str,
        *,
        reason: str | None = None,
    ) -> None:
        self.kind = kind
        self.rule = rule
        self.reason = reason
        self.risk = resolved.risk
        self.description: Template = resolved.description
        self.policy_hash = policy_hash
        self.spec = resolved.spec
        self.intent = resolved.intent if kind != "deny" else None  # a deny needs no judge
        # An allow with an intent judge carries the review a human gets if the judge objects.
        self._allow = Verdict(
            "allow",
            rule,
            policy_hash=policy_hash,
            risk=self.risk,
            intent=self.intent,
            review=self._review("", self.risk) if self.intent is not None else None,
        )
        self._constant: Verdict | None = None
        text = self.description.constant
        if text is not None and kind != "allow":
            self._constant = self._build(text, self.risk, reason)

    def verdict(
        self,
        call: ToolCall,
        ctx: CallContext,
        code_risk: Risk | None,
        reason: str | None = None,
        *,
        rule: str | None = None,
        errors: tuple[str, ...] = (),
    ) -> Verdict:
        """The verdict for this call. ``code_risk`` can raise the risk; ``reason`` and
        ``rule`` override the outcome's own (on_error uses both); ``errors`` is recorded."""
        risk = self.risk if code_risk is None else higher_risk(self.risk, code_risk)
        if self.kind == "allow":
            if risk == self.risk and rule is None:
                return self._allow
            return Verdict(
                "allow",
                rule or self.rule,
                policy_hash=self.policy_hash,
                risk=risk,
                intent=self.intent,
                review=self._review("", risk) if self.intent is not None else None,
            )
        if self._constant is not None and risk == self.risk and reason is None and rule is None:
            return self._constant
        description = self.description.render(call, ctx)
        return self._build(description, risk, reason or self.reason, rule or self.rule, errors)

    def _build(
        self,
        description: str,
        risk: Risk | None,
        reason: str | None,
        rule: str | None = None,
        errors: tuple[str, ...] = (),
    ) -> Verdict:
        rule = rule or self.rule
        if self.kind == "deny":
            return Verdict(
                "deny",
                rule,
                reason=reason,
                policy_hash=self.policy_hash,
                risk=risk,
                description=description,
                errors=errors,
            )
        review = self._review(description, risk)
        return Verdict(
            "require_approval",
            rule,
            reason=reason,
            review=review,
            policy_hash=self.policy_hash,
            risk=risk,
            description=description,
            errors=errors,
            intent=self.intent,
        )

    def _review(self, description: str, risk: Risk | None) -> ReviewSpec:
        spec = self.spec
        return ReviewSpec(
            allowed_decisions=spec.allowed_decisions,
            approvers=spec.approvers,
            editable_args=spec.editable_args,
            forbid_self_approval=spec.forbid_self_approval,
            allow_thread_approval=spec.allow_thread_approval,
            risk=risk,
            timeout_s=spec.timeout_s,
            on_timeout=spec.on_timeout,
            escalate_to=spec.escalate_to,
            escalate_after_s=spec.escalate_after_s,
            description=description,
            notify=spec.notify,
        )


@dataclass(frozen=True, slots=True)
class Rule:
    """A rule: its id, its compiled ``when`` and the outcome when it matches."""

    id: str
    decision: VerdictKind
    test: Cond
    outcome: Outcome
    path: str
    line: int | None


@dataclass(frozen=True, slots=True)
class ToolEntry:
    """One ``tools:`` entry. ``rules`` are already in evaluation order (deny, approval, allow)."""

    key: str
    is_glob: bool
    rules: tuple[Rule, ...]
    default: Outcome
    floor: Outcome | None
    risk: Risk | None
    rate_windows: tuple[tuple[RateBy, float], ...]
    path: str
    line: int | None
