"""Intent checks: does a call serve what the user asked? (a judge's answer, and what to do)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

IntentVerdict = Literal["consistent", "mismatch", "unclear"]
IntentAction = Literal["keep", "require_approval", "deny"]

INTENT_VERDICTS: tuple[IntentVerdict, ...] = get_args(IntentVerdict)
INTENT_ACTIONS: tuple[IntentAction, ...] = get_args(IntentAction)


@dataclass(frozen=True, slots=True)
class IntentSpec:
    """``intent:`` on a tool or rule: which judge, and what each answer does to the verdict.

    An action only tightens: ``keep`` leaves the policy's verdict, ``require_approval``
    turns an allow into a question for a human, ``deny`` denies. ``on_error`` (the judge
    failed, timed out or answered badly) may not be ``keep``.
    """

    judge: str
    on_mismatch: IntentAction = "require_approval"
    on_unclear: IntentAction = "require_approval"
    on_error: IntentAction = "require_approval"

    def action(self, verdict: IntentVerdict | Literal["error"]) -> IntentAction:
        if verdict == "consistent":
            return "keep"
        if verdict == "mismatch":
            return self.on_mismatch
        if verdict == "unclear":
            return self.on_unclear
        return self.on_error


@dataclass(frozen=True, slots=True)
class Judgement:
    """A judge's answer about one call (``verdict="error"`` when it gave none usable)."""

    judge: str
    verdict: IntentVerdict | Literal["error"]
    reason: str
    latency_ms: float = 0.0
    cached: bool = False

    def to_wire(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "verdict": self.verdict,
            "reason": self.reason,
            "latency_ms": round(self.latency_ms, 3),
            "cached": self.cached,
        }
