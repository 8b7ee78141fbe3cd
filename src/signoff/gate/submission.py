"""Submitting one agent step: build the request, store it with its outbox rows, tell people.

Allowed and denied calls never get here (the checks answered them). Calls that need review
become one :class:`ApprovalRequest` per step; then, in order: non-interactive mode resolves
it at once (gate/unattended.py), yolo mode approves at once, standing thread approvals are
applied, and whoever is still needed is notified.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from signoff.checks.limits import Limits, check_args, check_json, clip_text
from signoff.checks.schema import ModelArgs
from signoff.gate import unattended
from signoff.gate.reattach import reattach as find_earlier
from signoff.model import (
    Action,
    ActionRequest,
    ApprovalRequest,
    AuditEvent,
    CallContext,
    CallState,
    Inquiry,
    InvalidInput,
    PrincipalInfo,
    ReviewConfig,
    ReviewSpec,
    ToolCall,
    Verdict,
    chains,
    new_id,
    utcnow,
)
from signoff.model._built import built
from signoff.model.resolution import system_resolve
from signoff.model.verdicts import RISK_LEVELS
from signoff.policy.notify import wants
from signoff.policy.redact import Redaction
from signoff.store.base import OutboxStore

if TYPE_CHECKING:
    from signoff.gate.core import Gate

log = logging.getLogger("signoff.gate")


@dataclass(slots=True)
class Submission:
    """The answer to one agent step: a verdict per call, and the request if any needs review."""

    calls: list[ToolCall]
    verdicts: list[Verdict]
    request: ApprovalRequest | None = None
    created: bool = False
    reattached: bool = False  # the request was asked before a restart (see gate/reattach.py)
    stored_ids: dict[str, str] = field(default_factory=dict)  # submitted id -> id in request

    def stored_id(self, call_id: str) -> str:
        """The id of ``call_id`` in the request (another one when it was re-attached)."""
        return self.stored_ids.get(call_id, call_id)

    def verdict_for(self, call_id: str) -> Verdict:
        for call, verdict in zip(self.calls, self.verdicts, strict=True):
            if call.id == call_id:
                return verdict
        raise KeyError(call_id)

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "verdicts": [v.to_wire(c.id) for c, v in zip(self.calls, self.verdicts, strict=True)]
        }
        if self.request is not None:
            body["id"] = self.request.id
            body["status"] = self.request.status
        if self.reattached:
            body["reattached"] = True
            body["stored_ids"] = dict(self.stored_ids)
        return body


async def submit_checked(
    gate: Gate,
    calls: list[ToolCall],
    verdicts: list[Verdict],
    ctx: CallContext,
    inquiry: Inquiry | None,
    reattach: bool | None = None,
    request_id: str | None = None,
) -> Submission:
    """Store one request for the calls whose verdict needs review, and set it going.

    ``reattach`` looks for the same step asked before a restart (see gate/reattach.py); by
    default only for the first step this process submits per (thread, agent): the one a
    restarted agent asks again, so the lookup costs nothing on later steps."""
    check_call_count(calls, gate.limits)
    if any(v.judge_pending for v in verdicts):  # checked with gate.check(): judge them now
        verdicts = await gate.ajudge_all(calls, ctx, verdicts)
    sub = Submission(calls, verdicts)
    review = [(c, v) for c, v in zip(calls, verdicts, strict=True) if v.needs_approval]
    if not review:
        return sub
    _check_stored_input(gate, review, ctx)
    await gate.ensure_writable()
    if reattach is None:
        reattach = gate.first_step(ctx)
    if reattach and gate.settings.reattach and inquiry is None:
        earlier = await find_earlier(gate, [c for c, _ in review], ctx)
        if earlier is not None:
            sub.request, sub.reattached = earlier, True
            sub.stored_ids = _match_ids([c for c, _ in review], earlier)
            return sub
    ctx, truncated = _clip_context(ctx, gate.limits)
    request = build_request(gate, review, ctx, inquiry, request_id)
    event = _created_event(request, ctx, gate.redaction)
    if truncated:
        event.data["truncated_chars"] = truncated
    stored, created = await _create(gate, request, [event])
    sub.request, sub.created = stored, created
    if not created:
        return sub
    gate.sweeper.poke(stored.sweep_at)
    if not gate.interactive:
        sub.request = await unattended.resolve(gate, stored)
        return sub
    if gate.auto_approve:
        outcome: Literal["approved", "rejected"] = "rejected" if inquiry else "approved"
        message = (
            "approved automatically (yolo mode)"
            if outcome == "approved"
            else "no human is available to answer (yolo mode)"
        )
        sub.request = await _system_resolve(gate, stored, outcome, "yolo", message)
        return sub
    await notify(gate, stored)
    return sub


async def _system_resolve(
    gate: Gate,
    request: ApprovalRequest,
    outcome: Literal["approved", "rejected"],
    actor: str,
    message: str,
) -> ApprovalRequest:
    tr = await gate.update(
        request.id,
        lambda r: system_resolve(r, outcome, actor=actor, now=utcnow(), message=message),
    )
    return tr.request


def _match_ids(calls: list[ToolCall], req: ApprovalRequest) -> dict[str, str]:
    """Pair each submitted call with the stored call asking the same (name, args)."""
    free = list(req.action_requests)
    ids = {}
    for call in calls:
        for action in free:
            if action.name == call.name and action.args == to_jsonable_python(call.args):
                ids[call.id] = action.tool_call_id
                free.remove(action)
                break
    return ids


def check_call_count(calls: Sequence[ToolCall], limits: Limits) -> None:
    """One agent step holds at most ``limits.max_calls_per_request`` calls."""
    if len(calls) > limits.max_calls_per_request:
        raise InvalidInput(
            f"{len(calls)} calls in one step, over limits.max_calls_per_request "
            f"({limits.max_calls_per_request})",
            field="tool_calls",
        )


def _check_stored_input(
    gate: Gate, review: list[tuple[ToolCall, Verdict]], ctx: CallContext
) -> None:
    """Nothing unreadable is ever stored, whoever computed the verdicts (the limits stage
    already passed calls from :meth:`Gate.check`; inquiries and callers of
    ``asubmit_checked`` come here without it)."""
    for i, (call, _verdict) in enumerate(review):
        info = gate.tools.get(call.name)
        model = info.schema.model if info and isinstance(info.schema, ModelArgs) else None
        check_args(call.args, gate.limits, field=f"tool_calls.{i}.args", model=model)
    if ctx.attrs:
        check_json(ctx.attrs, gate.limits, "context.attrs")


def _clip_context(ctx: CallContext, limits: Limits) -> tuple[CallContext, dict[str, int]]:
    """Long conversation text is kept, cut with a visible marker; never a refusal."""
    user_request, cut_request = clip_text(ctx.user_request, limits)
    reasoning, cut_reasoning = clip_text(ctx.reasoning, limits)
    truncated = {
        name: n for name, n in (("user_request", cut_request), ("reasoning", cut_reasoning)) if n
    }
    if not truncated:
        return ctx, {}
    return replace(ctx, user_request=user_request, reasoning=reasoning), truncated


def _created_event(
    request: ApprovalRequest, ctx: CallContext, redaction: Redaction | None = None
) -> AuditEvent:
    """The ``created`` event: each call with its rule and, given ``redaction``, its
    arguments (secrets digested, cut at 4 KiB) and their digest."""
    calls = []
    for a in request.action_requests:
        call: dict[str, Any] = {"tool_call_id": a.tool_call_id, "tool": a.name, "rule": a.rule}
        if redaction is not None:
            call["args"], call["args_digest"] = redaction.audited(a.args)
        calls.append(call)
    return AuditEvent(
        event="created",
        at=request.created_at,
        request_id=request.id,
        thread=request.thread,
        principal=ctx.principal.id,
        agent=ctx.agent,
        policy_hash=request.policy_hash,
        data={"calls": calls, "kind": request.kind},
    )


async def _create(
    gate: Gate, request: ApprovalRequest, events: list[AuditEvent]
) -> tuple[ApprovalRequest, bool]:
    """Store the request with its notification outbox rows (one transaction when the store
    has a durable outbox). No prompts when nobody will be asked."""
    delivery = gate.delivery
    if delivery is None or not gate.interactive or gate.auto_approve:
        return await gate.store.create_request(request, events)
    try:
        outbox = delivery.plan(request)
    except Exception:
        log.exception("planning notifications for %s failed", request.id)
        outbox = []
    if delivery.durable:
        assert isinstance(gate.store, OutboxStore)
        stored, created = await gate.store.create_request(request, events, outbox=outbox)
    else:
        stored, created = await gate.store.create_request(request, events)
        if created:
            await delivery.outbox.enqueue_outbox(outbox)
    if created and outbox:
        delivery.poke()
    return stored, created


def build_request(
    gate: Gate,
    review: list[tuple[ToolCall, Verdict]],
    ctx: CallContext,
    inquiry: Inquiry | None,
    request_id: str | None = None,
) -> ApprovalRequest:
    """One request holding every reviewable call of a step; the earliest deadline wins (for
    an approval chain, its first stage's).

    The request, its calls and their actions are made without pydantic checking them again
    (:func:`~signoff.model._built.built`) when every value the agent gave is already of its
    field's exact type (:func:`_plain_step`); otherwise they are validated, as before."""
    now = utcnow()
    make: Callable[[type[Any], dict[str, Any]], Any] = (
        built if inquiry is None and _plain_step(review, ctx, request_id) else _validated
    )
    actions, configs, states = [], [], []
    timeout: float | None = None
    after: float | None = None
    for call, verdict in review:
        spec = verdict.review or ReviewSpec()
        info = gate.tools.get(call.name)
        actions.append(
            make(
                ActionRequest,
                {
                    "name": call.name,
                    "args": dict(call.args),
                    "tool_call_id": call.id,
                    "rule": verdict.rule,
                    "reason": verdict.reason,
                    "risk": verdict.risk,
                    "description": verdict.description or spec.description,
                    "intent": (
                        verdict.judgement.to_wire() if verdict.judgement is not None else None
                    ),
                },
            )
        )
        schema = info.schema.json_schema if info and info.schema else None
        config = ReviewConfig.of(call.id, call.name, spec, schema)
        configs.append(config)
        action = make(Action, {"name": call.name, "args": dict(call.args)})
        state = make(
            CallState,
            # the config's quorum: the spec's, validated (an int) when the config was built
            {"tool_call_id": call.id, "quorum": config.approvers.quorum, "action": action},
        )
        chains.fresh(config, state)
        states.append(state)
        # the earliest deadline and escalation over the calls, each as its stage asks now
        asked = chains.stage_config(config, state)
        timeout = asked.timeout_s if timeout is None else min(timeout, asked.timeout_s)
        if asked.on_timeout == "escalate":
            due = asked.escalate_after_s or asked.timeout_s / 2
            after = due if after is None else min(after, due)
    assert timeout is not None  # a request holds at least one call
    escalate_at = None if after is None else now + timedelta(seconds=after)
    principal = make(PrincipalInfo, {"id": ctx.principal.id, "roles": sorted(ctx.principal.roles)})
    return make(  # type: ignore[no-any-return]
        ApprovalRequest,
        {
            "waiter": gate.waiter_id,
            "lease_until": now + timedelta(seconds=gate.settings.lease),
            "id": request_id or new_id("req"),
            "kind": "inquiry" if inquiry else "tool_call",
            "thread": ctx.thread,
            "agent": ctx.agent,
            "principal": principal,
            "environment": ctx.environment,
            "user_request": ctx.user_request,
            "reasoning": ctx.reasoning,
            "attrs": _jsonable(ctx.attrs),
            "action_requests": actions,
            "review_configs": configs,
            "calls": states,
            "created_at": now,
            "expires_at": now + timedelta(seconds=timeout),
            "escalate_at": escalate_at,
            "policy_hash": review[0][1].policy_hash,
            "inquiry": inquiry,
            "fallback": gate.inquiry_judges.fallback_for(timeout) if inquiry else None,
        },
    )


def _validated(cls: type[BaseModel], values: dict[str, Any]) -> BaseModel:
    return cls(**values)


def _plain_step(
    review: list[tuple[ToolCall, Verdict]], ctx: CallContext, request_id: str | None
) -> bool:
    """True when every value of the step that a request stores as it is — the agent's names,
    ids, argument keys and context, and the verdict's rule, reason, risk and description —
    is already of its field's exact type, so validation would neither convert nor refuse
    it. Anything else (a ``str`` subclass, a number for a name, an intent judge's answer)
    takes pydantic's validation, which converts or refuses it as before."""
    for call, verdict in review:
        if type(call.name) is not str or type(call.id) is not str:
            return False
        if verdict.judgement is not None or type(verdict.rule) is not str:
            return False
        if verdict.reason is not None and type(verdict.reason) is not str:
            return False
        risk = verdict.risk
        if risk is not None and (type(risk) is not str or risk not in RISK_LEVELS):
            return False
        description = verdict.description or (verdict.review or _NO_REVIEW).description
        if type(description) is not str or type(verdict.policy_hash) is not str:
            return False
        for key in call.args:
            if type(key) is not str:
                return False
    principal = ctx.principal
    if type(principal.id) is not str or type(ctx.thread) is not str:
        return False
    for role in principal.roles:
        if type(role) is not str:
            return False
    for text in (ctx.agent, ctx.environment, ctx.user_request, ctx.reasoning, request_id):
        if text is not None and type(text) is not str:
            return False
    return True


_NO_REVIEW = ReviewSpec()


async def notify(gate: Gate, req: ApprovalRequest) -> None:
    """Tell the in-process channels the policy names for this request; audit each outcome."""
    for channel in gate.channels:
        if not wants(req, channel.name):
            continue
        try:
            await channel.notify(req, gate)
        except Exception as exc:
            log.warning("channel %s failed to notify: %s", channel.name, exc)
            event = AuditEvent(
                event="notification_failed",
                request_id=req.id,
                thread=req.thread,
                actor=channel.name,
                data={"error": str(exc)},
            )
        else:
            event = AuditEvent(
                event="notified", request_id=req.id, thread=req.thread, actor=channel.name
            )
        await gate.store.append_audit([event])


def _jsonable(attrs: Mapping[str, Any]) -> dict[str, Any]:
    if not attrs:  # most calls carry none: no JSON round trip
        return {}
    return dict(json.loads(json.dumps(dict(attrs), default=str)))


__all__ = ["Submission", "build_request", "notify", "submit_checked"]
