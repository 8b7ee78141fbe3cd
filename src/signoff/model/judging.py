"""Applying an intent judge's answer to a verdict: it can only get stricter."""

from __future__ import annotations

from dataclasses import replace

from signoff.model.calls import ToolCall
from signoff.model.intent import Judgement
from signoff.model.text import inert
from signoff.model.verdicts import ReviewSpec, Verdict


def tighten(verdict: Verdict, judgement: Judgement, call: ToolCall) -> Verdict:
    """The verdict after the judge: ``keep``, ``require_approval`` or ``deny``."""
    spec = verdict.intent
    assert spec is not None
    action = spec.action(judgement.verdict)
    settled = replace(verdict, intent=None, judgement=judgement)
    if action == "keep" or (action == "require_approval" and settled.needs_approval):
        return settled
    said = _said(judgement)
    if action == "deny":
        return replace(
            settled,
            kind="deny",
            rule=f"{verdict.rule}.intent",
            reason=f"the intent check {said}",
            review=None,
        )
    review = verdict.review or ReviewSpec()
    description = f"{call.name}: the intent check {said}"
    return replace(
        settled,
        kind="require_approval",
        rule=f"{verdict.rule}.intent",
        reason=f"the intent check {said}",
        review=replace(review, description=description),
        description=description,
    )


def _said(judgement: Judgement) -> str:
    """What the judge said, as inert text labelled as model output."""
    reason = inert(judgement.reason)[:300]
    if judgement.verdict == "error":
        return f"failed (judge {judgement.judge}: {reason})"
    return f"(judge {judgement.judge}, model output) answered {judgement.verdict}: {reason}"
