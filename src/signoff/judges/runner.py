"""Running intent judges for the gate: the answer cache, timing, the audit and metrics.

One :class:`IntentChecker` per gate. It asks the judge an ``intent:`` names about a call —
the tool, its arguments with secret-named values masked, and the call context's
``user_request`` and ``reasoning`` — and turns the answer into a :class:`Judgement`. Answers
are cached per (judge, its model and prompt version, user request, reasoning, tool, canonical
arguments) for the judge's ``cache_ttl``; failures are never cached. Every check is audited
(``intent_checked``) and counted.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Mapping
from typing import Any

from signoff.judges.base import Judge, JudgeAnswer, JudgeError, JudgeRequest
from signoff.model import AuditEvent, CallContext, ToolCall
from signoff.model.intent import IntentSpec, Judgement
from signoff.policy.redact import Redaction, mask

log = logging.getLogger("signoff.judges")

CACHE_LIMIT = 10_000
CacheKey = tuple[str, str, str | None, str | None, str, str]


class IntentChecker:
    def __init__(
        self, judges: Mapping[str, Judge], redaction: Redaction, store: Any | None = None
    ) -> None:
        self.judges = dict(judges)
        self.redaction = redaction
        self.store = store  # audit_nowait; None: not audited (``signoff policy explain``)
        self._cache: OrderedDict[CacheKey, tuple[float, JudgeAnswer]] = OrderedDict()
        #: (judge, verdict) → count, for /metrics (``verdict`` "error" included)
        self.counts: Counter[tuple[str, str]] = Counter()
        self.cache_hits = 0

    def cached(self, call: ToolCall, ctx: CallContext, spec: IntentSpec) -> Judgement | None:
        """The cached answer about ``call``, if fresh (no I/O: the hot path of a repeat)."""
        judge = self.judges.get(spec.judge)
        if judge is None:
            return None
        started = time.perf_counter()
        key = self._key(call, ctx, spec, judge)
        found = self._cache.get(key) if key is not None else None
        if found is None or found[0] <= time.monotonic():
            return None
        self.cache_hits += 1
        answer = found[1]
        judgement = Judgement(spec.judge, answer.verdict, answer.reason, _ms(started), cached=True)
        self._done(call, ctx, judgement)
        return judgement

    async def ask(self, call: ToolCall, ctx: CallContext, spec: IntentSpec) -> Judgement:
        """Ask the judge (never raises: a failure is ``verdict="error"``); caches the answer."""
        started = time.perf_counter()
        judgement = await self._ask(call, ctx, spec, started)
        self._done(call, ctx, judgement)
        return judgement

    async def judge(self, call: ToolCall, ctx: CallContext, spec: IntentSpec) -> Judgement:
        """:meth:`cached`, else :meth:`ask`."""
        return self.cached(call, ctx, spec) or await self.ask(call, ctx, spec)

    def _key(
        self, call: ToolCall, ctx: CallContext, spec: IntentSpec, judge: Judge
    ) -> CacheKey | None:
        try:
            args = self.redaction.digest(call.args)
        except Exception:  # arguments that cannot be encoded are simply not cached
            return None
        return (spec.judge, judge.cache_identity, ctx.user_request, ctx.reasoning, call.name, args)

    async def _ask(
        self, call: ToolCall, ctx: CallContext, spec: IntentSpec, started: float
    ) -> Judgement:
        judge = self.judges.get(spec.judge)
        if judge is None:
            return Judgement(spec.judge, "error", f"judge {spec.judge!r} is not configured")
        request = JudgeRequest(
            tool=call.name,
            args=mask(dict(call.args), self.redaction.keys),
            user_request=ctx.user_request,
            reasoning=ctx.reasoning,
        )
        try:
            answer = await judge.answer(request)
        except JudgeError as exc:
            return Judgement(spec.judge, "error", str(exc)[:500], _ms(started))
        except Exception as exc:  # a judge bug is a failed check, never an allow
            log.exception("judge %s raised", spec.judge)
            text = f"{type(exc).__name__}: {exc}"[:500]
            return Judgement(spec.judge, "error", text, _ms(started))
        key = self._key(call, ctx, spec, judge)
        ttl = float(getattr(judge, "cache_ttl_s", 600.0))
        if key is not None and ttl > 0:
            self._cache[key] = (time.monotonic() + ttl, answer)
            self._cache.move_to_end(key)
            while len(self._cache) > CACHE_LIMIT:
                self._cache.popitem(last=False)
        return Judgement(spec.judge, answer.verdict, answer.reason, _ms(started))

    def _done(self, call: ToolCall, ctx: CallContext, judgement: Judgement) -> None:
        self.counts[(judgement.judge, judgement.verdict)] += 1
        self._audit(call, ctx, judgement)

    def _audit(self, call: ToolCall, ctx: CallContext, judgement: Judgement) -> None:
        if self.store is None:
            return
        try:
            self.store.audit_nowait(
                AuditEvent(
                    event="intent_checked",
                    thread=ctx.thread,
                    tool=call.name,
                    tool_call_id=call.id,
                    principal=ctx.principal.id,
                    agent=ctx.agent,
                    data=judgement.to_wire(),
                )
            )
        except Exception:
            log.exception("auditing an intent check failed")

    async def aclose(self) -> None:
        for judge in self.judges.values():
            try:
                await judge.aclose()
            except Exception:
                log.exception("closing judge %s failed", judge.name)


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
