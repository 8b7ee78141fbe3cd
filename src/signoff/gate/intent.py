"""The intent check as a gate stage: a judge's answer can only tighten a verdict.

A tool or rule with ``intent:`` gives *pending* verdicts (``Verdict.judge_pending``): the
synchronous checks cannot call a model, so ``gate.check()`` leaves the judge to whoever
acts on the verdict — :meth:`Gate.acheck`, :meth:`Gate.ajudge`, submission, the guard, the
integrations. A pending verdict is never ``allowed`` (fail closed). The answer maps through
``on_mismatch`` / ``on_unclear`` / ``on_error`` to ``keep`` (the policy's verdict),
``require_approval`` or ``deny``; an allow can become a question or a deny, a question a
deny, never the other way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from signoff.gate.checking import CheckState
from signoff.judges.runner import IntentChecker
from signoff.model import CallContext, ToolCall, Verdict
from signoff.model.intent import Judgement
from signoff.model.judging import tighten

Settle = Callable[[ToolCall, CallContext, Verdict], Awaitable[Verdict]]


class IntentStage:
    """The asynchronous stage after every synchronous one (see gate/checking.py)."""

    name = "intent"

    def __init__(self, settle: Settle) -> None:
        self.settle = settle

    async def __call__(self, state: CheckState) -> None:
        verdict = state.verdict
        if verdict is None or verdict.intent is None:
            return
        state.verdict = await self.settle(state.call, state.ctx, verdict)


async def settle(
    checker: IntentChecker,
    call: ToolCall,
    ctx: CallContext,
    verdict: Verdict,
    on_portal: Callable[[Coroutine[Any, Any, Judgement]], Awaitable[Judgement]],
) -> Verdict:
    """Run the judge of a pending verdict (a cache hit right here, a question to the judge on
    the gate's own loop, where its HTTP client lives) and apply its answer."""
    spec = verdict.intent
    if spec is None:
        return verdict
    judgement = checker.cached(call, ctx, spec)
    if judgement is None:
        judgement = await on_portal(checker.ask(call, ctx, spec))
    return tighten(verdict, judgement, call)
