"""Checking one call: an ordered pipeline of stages, cheapest first.

Every call the gate sees goes through the same stages (today: limits → schema →
validators → policy). A stage looks at the call and the verdict so far and may change it; a ``deny``
anywhere ends the walk, a ``require_approval`` anywhere asks a human. The synchronous stages
do no I/O, so the allow/deny path of ``@gate.guard`` costs microseconds. The seam is built
for two kinds of stage that come later:

* a synchronous stage backed by the store through an in-memory cache (standing grants), added
  with :meth:`Pipeline.add` like any other;
* an asynchronous stage (an intent judge that calls a model) added with
  :meth:`Pipeline.add_async`; it runs only on the async path (:meth:`Pipeline.arun`), after
  every synchronous stage, and only while the verdict is not already a deny.

A stage that raises fails closed: the policy's ``on_error`` decides (never ``allow``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from signoff.checks import ArgsSchema
from signoff.checks.limits import Limits, check_args, check_json
from signoff.checks.schema import ModelArgs
from signoff.gate.principals import PrincipalStage
from signoff.model import AuditEvent, CallContext, InvalidInput, Risk, ToolCall, Verdict
from signoff.model.audit import AuditEventType
from signoff.policy import Policy
from signoff.policy.rates import RateCounter
from signoff.policy.redact import Redaction
from signoff.store import Store

log = logging.getLogger("signoff.gate")

Validator = Callable[[ToolCall, CallContext], Verdict | None]


@dataclass(slots=True)
class ToolInfo:
    """What the gate knows about a tool beyond the policy: its schema, risk and validators."""

    name: str
    schema: ArgsSchema | None = None
    risk: Risk | None = None
    validators: list[Validator] = field(default_factory=list)


@dataclass(slots=True)
class CheckState:
    """One call on its way through the pipeline.

    ``verdict`` is the verdict so far (None until a stage gives one); ``requested`` is a
    ``require_approval`` an earlier stage asked for, which a later ``allow`` cannot undo.
    A stage sets ``final`` when its verdict must stand whatever follows (a failing validator).
    """

    call: ToolCall
    ctx: CallContext
    info: ToolInfo | None
    risk: Risk | None
    verdict: Verdict | None = None
    requested: Verdict | None = None
    final: bool = False  # a stage's verdict that no later stage may change (on_error)

    @property
    def done(self) -> bool:
        return self.final or (self.verdict is not None and self.verdict.denied)


class Stage(Protocol):
    """A synchronous, I/O-free step: read the state, set ``state.verdict`` / ``requested``."""

    name: str

    def __call__(self, state: CheckState) -> None: ...


class AsyncStage(Protocol):
    """A step that may wait (a model call). It may only tighten the verdict."""

    name: str

    def __call__(self, state: CheckState) -> Awaitable[None]: ...


class LimitsStage:
    """Arguments (and the context's ``attrs``) must be faithful JSON data within ``limits:``
    (see :mod:`signoff.checks.limits`): a deny with rule ``limits`` otherwise."""

    name = "limits"

    def __init__(self, policy: Policy, limits: Limits) -> None:
        self.policy = policy
        self.limits = limits

    def __call__(self, state: CheckState) -> None:
        info = state.info
        schema = info.schema if info is not None else None
        model = schema.model if isinstance(schema, ModelArgs) else None
        try:
            check_args(state.call.args, self.limits, field="args", model=model)
            if state.ctx.attrs:
                check_json(state.ctx.attrs, self.limits, "context.attrs")
        except InvalidInput as exc:
            state.verdict = Verdict.deny(
                "limits",
                f"refused before any check: {exc}",
                policy_hash=self.policy.short_hash,
                errors=(str(exc),),
            )


class SchemaStage:
    """Arguments must match the tool's registered schema (deny with field errors)."""

    name = "schema"

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def __call__(self, state: CheckState) -> None:
        info = state.info
        if info is None or info.schema is None:
            return
        errors = info.schema.errors(state.call.args)
        if errors:
            state.verdict = Verdict.deny(
                "schema",
                "arguments do not match the tool's schema: " + "; ".join(errors),
                policy_hash=self.policy.short_hash,
                errors=tuple(errors),
            )


class ValidatorStage:
    """Per-tool Python business rules registered with ``@gate.validator``."""

    name = "validators"

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def __call__(self, state: CheckState) -> None:
        info = state.info
        if info is None:
            return
        for validate in info.validators:
            try:
                v = validate(state.call, state.ctx)
            except Exception as exc:
                state.verdict = self.policy.on_error(
                    state.call,
                    state.ctx,
                    f"validator {getattr(validate, '__name__', '?')} "
                    f"raised {type(exc).__name__}: {exc}",
                )
                state.final = True
                return
            if v is None or v.allowed:
                continue
            if v.denied:
                state.verdict = v
                return
            state.requested = state.requested or v


class PolicyStage:
    """The rules of ``signoff.yaml``; a validator's request for approval survives an allow."""

    name = "policy"

    def __init__(self, policy: Policy, rates: RateCounter) -> None:
        self.policy = policy
        self.rates = rates

    def __call__(self, state: CheckState) -> None:
        risk = state.risk
        if risk is None and state.info is not None:
            risk = state.info.risk
        verdict = self.policy.evaluate(state.call, state.ctx, risk=risk, rates=self.rates)
        if state.requested is not None and verdict.allowed:
            verdict = state.requested
        state.verdict = verdict


class Pipeline:
    """The ordered stages every call goes through; see the module docstring."""

    def __init__(self, policy: Policy, stages: Sequence[Stage] = ()) -> None:
        self.policy = policy
        self.stages: list[Stage] = list(stages)
        self.async_stages: list[AsyncStage] = []

    def add(self, stage: Stage, *, before: str | None = None, after: str | None = None) -> None:
        """Insert a synchronous stage (at the end, or next to the named one)."""
        self.stages.insert(self._position(before, after), stage)

    def add_async(self, stage: AsyncStage) -> None:
        """Append an asynchronous stage (runs after every synchronous one)."""
        self.async_stages.append(stage)

    def _position(self, before: str | None, after: str | None) -> int:
        names = [s.name for s in self.stages]
        if before is not None:
            return names.index(before)
        if after is not None:
            return names.index(after) + 1
        return len(names)

    def run(
        self, call: ToolCall, ctx: CallContext, info: ToolInfo | None, risk: Risk | None
    ) -> Verdict:
        """The synchronous stages; never raises (a failing stage gives ``on_error``)."""
        state = CheckState(call, ctx, info, risk)
        try:
            for stage in self.stages:
                stage(state)
                if state.done:
                    break
        except Exception as exc:  # a bug anywhere on the path must not let the call through
            log.exception("check failed for %s", call.name)
            return self.policy.on_error(call, ctx, f"internal error: {exc}")
        return self._final(state)

    async def arun(
        self, call: ToolCall, ctx: CallContext, info: ToolInfo | None, risk: Risk | None
    ) -> Verdict:
        """Every stage, the asynchronous ones last; never raises."""
        verdict = self.run(call, ctx, info, risk)
        if verdict.denied or not self.async_stages:
            return verdict
        state = CheckState(call, ctx, info, risk, verdict=verdict)
        try:
            for stage in self.async_stages:
                await stage(state)
                if state.done:
                    break
        except Exception as exc:
            log.exception("async check failed for %s", call.name)
            return self.policy.on_error(call, ctx, f"internal error: {exc}")
        return self._final(state)

    def _final(self, state: CheckState) -> Verdict:
        if state.verdict is None:  # no stage decided: only possible with a custom pipeline
            return self.policy.on_error(state.call, state.ctx, "no check stage gave a verdict")
        return state.verdict


class AuditHealthStage:
    """An allowed call must not run unrecorded: while the store's batched audit writer is
    failing, allowed calls are denied (rule ``audit_unavailable``) until a write succeeds."""

    name = "audit"

    def __init__(self, policy: Policy, store: Store) -> None:
        self.policy = policy
        self.store = store

    def __call__(self, state: CheckState) -> None:
        if state.verdict is None or not state.verdict.allowed:
            return
        failure = self.store.audit_failure()
        if failure is not None:
            state.verdict = Verdict.deny(
                "audit_unavailable",
                f"the audit log cannot be written ({failure}); nothing runs unrecorded",
                policy_hash=self.policy.short_hash,
            )


def default_pipeline(policy: Policy, rates: RateCounter, limits: Limits, store: Store) -> Pipeline:
    """limits → principals → schema → validators → policy → audit health (grants are added
    after the policy by the gate): what every gate checks."""
    return Pipeline(
        policy,
        [
            LimitsStage(policy, limits),
            PrincipalStage(policy),
            SchemaStage(policy),
            ValidatorStage(policy),
            PolicyStage(policy, rates),
            AuditHealthStage(policy, store),
        ],
    )


def audit_verdict(
    store: Store,
    call: ToolCall,
    ctx: CallContext,
    verdict: Verdict,
    redaction: Redaction | None = None,
) -> None:
    """Queue the audit event of an allowed or denied call (batched; no I/O here).

    With ``redaction`` (the gate's) the event carries the call's arguments — secrets
    digested, cut at 4 KiB — and their digest; both are worked out by the store's audit
    writer when it serializes the event, not on the caller's path."""
    data: dict[str, Any] = {}
    if verdict.reason:
        data["reason"] = verdict.reason
    if redaction is not None:
        data["args"], data["args_digest"] = redaction.deferred(call.args)
    event: AuditEventType = "allowed" if verdict.allowed else "denied"
    if verdict.grant is not None:
        data["grant_id"] = verdict.grant
        if verdict.allowed:
            event = "auto_approved"  # a standing approval stood in for a human
    try:
        store.audit_nowait(
            AuditEvent(
                event=event,
                thread=ctx.thread,
                tool=call.name,
                tool_call_id=call.id,
                principal=ctx.principal.id,
                agent=ctx.agent,
                rule=verdict.rule,
                policy_hash=verdict.policy_hash,
                data=data,
            )
        )
    except Exception:
        log.exception("audit queue failed")
        raise
