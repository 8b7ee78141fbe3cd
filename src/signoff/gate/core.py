"""The gate: the one runtime object every integration uses.

evaluate → (allow | deny | require_approval → persist → notify → wait → resolve) → run → record.

The allow/deny path is synchronous and touches no I/O (audit events are queued for the
store's batched writer), so guarding a tool that the policy allows costs microseconds.
Everything that waits for humans is async; sync callers reach it through a private event
loop thread (:class:`~signoff.gate.portal.Portal`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import ValidationError

from signoff.checks import ArgsSchema, schema_for
from signoff.gate import messages
from signoff.gate.context import ContextMethods, current_context
from signoff.gate.ledger import run_once
from signoff.gate.portal import Portal
from signoff.gate.ratelimit import RateWindows
from signoff.model import (
    Action,
    ActionRequest,
    ApprovalRequest,
    AuditEvent,
    CallContext,
    CallState,
    Decision,
    DecisionError,
    DecisionRecord,
    Inquiry,
    NotAuthorized,
    Principal,
    PrincipalInfo,
    ReviewConfig,
    ReviewSpec,
    Risk,
    SignoffError,
    StoreError,
    ToolCall,
    Verdict,
    new_id,
    utcnow,
)
from signoff.model.resolution import (
    ThreadGrant,
    Transition,
    apply_decisions,
    cancel,
    due_transition,
    mark_execution,
    may_decide,
    system_resolve,
)
from signoff.policy import Policy
from signoff.store import Store, open_store

if TYPE_CHECKING:
    from signoff.channels import Channel, Messenger
    from signoff.channels.delivery import Delivery
    from signoff.client import RemoteGate

log = logging.getLogger("signoff.gate")

Validator = Callable[[ToolCall, CallContext], Verdict | None]
T = TypeVar("T")
NON_INTERACTIVE_ENV = "SIGNOFF_NON_INTERACTIVE"
CONFIG_ENV = "SIGNOFF_CONFIG"


@dataclass(slots=True)
class ToolInfo:
    """What the gate knows about a tool beyond the policy: its schema, risk and validators."""

    name: str
    schema: ArgsSchema | None = None
    risk: Risk | None = None
    validators: list[Validator] = field(default_factory=list)


@dataclass(slots=True)
class Submission:
    """The answer to one agent step: a verdict per call, and the request if any needs review."""

    calls: list[ToolCall]
    verdicts: list[Verdict]
    request: ApprovalRequest | None = None
    created: bool = False

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
        return body


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class Gate(ContextMethods):
    """Decides, asks, waits, runs and records — for one policy and one store."""

    def __init__(
        self,
        policy: Policy,
        store: Store | None = None,
        *,
        interactive: bool | None = None,
        channels: Sequence[Channel | Messenger] = (),
        sweep_interval: float = 1.0,
        approver: str | None = None,
        auto_approve: bool = False,
    ) -> None:
        self.policy = policy
        self.store: Store = store if store is not None else open_store(policy.store_url)
        self.interactive = (
            (not _env_flag(NON_INTERACTIVE_ENV)) if interactive is None else interactive
        )
        # Channels from the policy's ``channels:`` section plus those passed in (which win on
        # a name clash). In-process channels are called directly; messengers (Slack, email…)
        # go through the store's outbox, sent by the delivery worker.
        self.channels: list[Channel] = []
        self.delivery: Delivery | None = None
        self._deliverer: asyncio.Future[None] | None = None
        self._setup_channels(channels)
        # yolo mode: calls that need approval are approved at once (audited, actor "yolo");
        # deny rules still apply, and questions (inquiries) get "no human available".
        self.auto_approve = auto_approve
        self.sweep_interval = sweep_interval
        self.default_approver = approver
        self.tools: dict[str, ToolInfo] = {}
        self.rates = RateWindows()
        self._rate_tools: dict[str, bool] = {}
        self._portal = Portal()
        self._start_lock = threading.Lock()
        self._started = False
        self._closed = False
        self._sweeper: asyncio.Future[None] | None = None
        self._sweep_wake: asyncio.Event | None = None

    def _setup_channels(self, explicit: Sequence[Channel | Messenger]) -> None:
        from signoff.channels import Messenger, build_channels
        from signoff.channels.delivery import delivery_for

        names = {c.name for c in explicit}
        chosen = [c for c in build_channels(self.policy) if c.name not in names] + list(explicit)
        messengers = [c for c in chosen if isinstance(c, Messenger)]
        self.channels = [c for c in chosen if not isinstance(c, Messenger)]
        if messengers:
            self.delivery = delivery_for(self, messengers)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_config(
        cls, path: str | os.PathLike[str] | None = None, **kwargs: Any
    ) -> Gate | RemoteGate:
        """Load ``signoff.yaml`` (default: ``$SIGNOFF_CONFIG`` or ``./signoff.yaml``).

        With a ``remote: {url, token}`` section the answer is a
        :class:`~signoff.client.RemoteGate` talking to ``signoff serve`` (same API).
        """
        policy = Policy.load(resolve_config_path(path))
        remote = policy.sections.get("remote")
        if remote:
            from signoff.client import RemoteGate

            return RemoteGate.from_section(remote, **kwargs)
        return cls(policy, **kwargs)

    @classmethod
    def from_interrupt_on(
        cls, interrupt_on: Mapping[str, Any], *, store: Store | None = None, **kwargs: Any
    ) -> Gate:
        """LangChain's ``interrupt_on`` mapping as a gate (in-memory store unless given)."""
        from signoff.store import MemoryStore

        return cls(
            Policy.from_interrupt_on(interrupt_on),
            store if store is not None else MemoryStore(),
            **kwargs,
        )

    # ------------------------------------------------------------------ registration
    def tool(self, name: str, *, schema: Any = None, risk: Risk | None = None) -> ToolInfo:
        """Register (or update) a tool's schema and code-level risk."""
        info = self.tools.setdefault(name, ToolInfo(name))
        if schema is not None:
            info.schema = schema if hasattr(schema, "errors") else schema_for(schema)
        if risk is not None:
            info.risk = risk
        return info

    def validator(self, tool: str) -> Callable[[Validator], Validator]:
        """Decorator: ``fn(call, ctx) -> Verdict | None`` runs after the schema check and before
        the policy. Returning None means "no objection"; raising is treated as ``on_error``."""

        def register(fn: Validator) -> Validator:
            self.tool(tool).validators.append(fn)
            return fn

        return register

    def guard(self, fn: Any = None, **options: Any) -> Any:
        """Decorator gating a sync or async function; see :func:`signoff.gate.guard.guard`."""
        from signoff.gate.guard import guard

        return guard(self, fn, **options)

    def _principal(self, id: str, roles: Iterable[str]) -> Principal:
        return self.policy.principal(id, roles)  # roles from people: when listed there

    # ------------------------------------------------------------------ checks (hot path)
    def check(
        self,
        call: ToolCall,
        ctx: CallContext | None = None,
        *,
        risk: Risk | None = None,
        audit: bool = True,
    ) -> Verdict:
        """Schema → validators → policy, cheapest first; never raises (fails closed).

        Allowed and denied verdicts are audited through the batched writer when ``audit``.
        """
        ctx = ctx if ctx is not None else current_context()
        info = self.tools.get(call.name)
        try:
            verdict = self._check(call, ctx, info, risk)
        except Exception as exc:  # a bug anywhere on the path must not let the call through
            log.exception("check failed for %s", call.name)
            verdict = self.policy.on_error(call, ctx, f"internal error: {exc}")
        if audit and not verdict.needs_approval:
            self._audit_verdict(call, ctx, verdict)
        return verdict

    def _check(
        self, call: ToolCall, ctx: CallContext, info: ToolInfo | None, risk: Risk | None
    ) -> Verdict:
        requested: Verdict | None = None
        if info is not None:
            if info.schema is not None:
                errors = info.schema.errors(call.args)
                if errors:
                    return Verdict.deny(
                        "schema",
                        "arguments do not match the tool's schema: " + "; ".join(errors),
                        policy_hash=self.policy.short_hash,
                        errors=tuple(errors),
                    )
            for validate in info.validators:
                try:
                    v = validate(call, ctx)
                except Exception as exc:
                    return self.policy.on_error(
                        call,
                        ctx,
                        f"validator {getattr(validate, '__name__', '?')} "
                        f"raised {type(exc).__name__}: {exc}",
                    )
                if v is None or v.allowed:
                    continue
                if v.denied:
                    return v
                requested = requested or v
            risk = risk or info.risk
        verdict = self.policy.evaluate(call, ctx, risk=risk, rates=self.rates)
        if requested is not None and verdict.allowed:
            return requested
        return verdict

    def _audit_verdict(self, call: ToolCall, ctx: CallContext, verdict: Verdict) -> None:
        data: dict[str, Any] = {}
        if verdict.reason:
            data["reason"] = verdict.reason
        try:
            self.store.audit_nowait(
                AuditEvent(
                    event="allowed" if verdict.allowed else "denied",
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

    def record_execution(self, call: ToolCall, ctx: CallContext) -> None:
        """Count an executed call for the policy's rate limits (only tools that have them)."""
        windows = self._rate_tools.get(call.name)
        if windows is None:
            windows = self._rate_tools[call.name] = bool(self.policy.rate_windows(call.name))
        if windows:
            self.rates.record(call.name, ctx, utcnow())

    def audit_verdict(self, call: ToolCall, ctx: CallContext, verdict: Verdict) -> None:
        """Audit an allow/deny decided outside :meth:`check` (e.g. by a framework predicate)."""
        self._audit_verdict(call, ctx, verdict)

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run one of the gate's coroutines from sync code (on the gate's own loop thread)."""
        return self._portal.run(coro)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Open the store and start the sweeper (done lazily by the first call that needs it)."""
        if self._started:
            return
        self._portal.run(self.astart())

    async def astart(self) -> None:
        if self._started:
            return
        with self._start_lock:
            if self._started:
                return
            if self._closed:
                raise SignoffError("this gate is closed")
            self._started = True
        try:
            await self._on_portal(self._start_on_portal())
        except BaseException:
            self._started = False
            raise

    async def _start_on_portal(self) -> None:
        await self.store.open()
        await self._seed_rates()
        self._sweep_wake = asyncio.Event()
        await self.sweep()  # expire what passed its deadline while nobody was running
        self._sweeper = asyncio.ensure_future(self._sweep_loop())
        if self.delivery is not None:
            self._deliverer = asyncio.ensure_future(self.delivery.run())

    async def _on_portal(self, coro: Any) -> Any:
        """Run ``coro`` on the portal loop, awaited from whatever loop we are on."""
        fut = self._portal.submit(coro)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return fut.result()
        return await asyncio.wrap_future(fut)

    async def _seed_rates(self) -> None:
        """Replay recent executions from the audit so a restart does not reset rate limits."""
        from signoff.store import AuditQuery

        names = set(self.tools) | {
            k for k in self.policy.tool_keys if "*" not in k and "?" not in k and "[" not in k
        }
        for tool in sorted(names):
            windows = self.policy.rate_windows(tool)
            if not windows:
                continue
            since = utcnow() - timedelta(seconds=max(window for _by, window in windows))
            after = 0
            while True:
                rows = await self.store.read_audit(
                    AuditQuery(after_seq=after, tool=tool, since=since, limit=1000)
                )
                for row in rows:
                    if row.event in ("allowed", "executed"):
                        ctx = CallContext(
                            principal=Principal(row.principal or ""),
                            thread=row.thread or "",
                            agent=row.agent,
                        )
                        self.rates.record(tool, ctx, row.at)
                if len(rows) < 1000:
                    break
                after = rows[-1].seq

    def close(self) -> None:
        """Flush the audit log, stop the sweeper and close the store."""
        if self._closed:
            return
        self._closed = True
        try:
            self._portal.run(self._close_on_portal(), timeout=30)
        finally:
            self._portal.stop()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._on_portal(self._close_on_portal())
        finally:
            await asyncio.to_thread(self._portal.stop)

    async def _close_on_portal(self) -> None:
        if self._sweeper is not None:
            # Python 3.11's wait_for swallows a cancel that races with the wake event
            # (a request submitted just before close): cancel until the task really ends.
            while not self._sweeper.done():
                self._sweeper.cancel()
                await asyncio.wait([self._sweeper], timeout=0.1)
            with suppress(asyncio.CancelledError):
                await self._sweeper
        if self.delivery is not None and self._deliverer is not None:
            await self.delivery.stop(self._deliverer)
        await self.store.close()

    def __enter__(self) -> Gate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Gate:
        await self.astart()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ sweeper
    async def sweep(self) -> int:
        """Expire or escalate every due request once; returns how many changed."""
        changed = 0
        while True:
            ids = await self.store.due_requests(utcnow(), limit=200)
            if not ids:
                return changed
            progressed = 0
            for request_id in ids:
                tr = await self._update(request_id, _due_mutation)
                if tr.changed:
                    changed += 1
                    progressed += 1
                    await self._after_change(tr)
            if not progressed:
                return changed

    async def _sweep_loop(self) -> None:
        assert self._sweep_wake is not None
        while True:
            try:
                await self.sweep()
                nxt = await self.store.next_due_at()
            except Exception:
                log.exception("sweeper pass failed; retrying")
                nxt = None
            delay = self.sweep_interval
            if nxt is not None:
                delay = max(0.0, min(delay, (nxt - utcnow()).total_seconds()))
            self._sweep_wake.clear()
            with suppress(TimeoutError):
                await asyncio.wait_for(self._sweep_wake.wait(), timeout=delay)

    def _poke_sweeper(self) -> None:
        wake = self._sweep_wake
        if wake is not None:
            self._portal.loop.call_soon_threadsafe(wake.set)

    # ------------------------------------------------------------------ submit
    async def asubmit(
        self, calls: Sequence[ToolCall], ctx: CallContext | None = None, *, risk: Risk | None = None
    ) -> Submission:
        """Check one agent step's calls; store one request for those that need review.

        Allowed and denied calls are decided at once (and audited); the request, if any,
        holds every reviewable call of the step. Re-submitting the same (thread, call id)
        with the same arguments returns the existing request.
        """
        ctx = ctx if ctx is not None else current_context()
        verdicts = [self.check(c, ctx, risk=risk) for c in calls]
        return await self.asubmit_checked(list(calls), verdicts, ctx)

    def submit(
        self, calls: Sequence[ToolCall], ctx: CallContext | None = None, *, risk: Risk | None = None
    ) -> Submission:
        ctx = ctx if ctx is not None else current_context()
        verdicts = [self.check(c, ctx, risk=risk) for c in calls]
        return self._portal.run(self.asubmit_checked(list(calls), verdicts, ctx))

    async def asubmit_checked(
        self,
        calls: list[ToolCall],
        verdicts: list[Verdict],
        ctx: CallContext,
        *,
        inquiry: Inquiry | None = None,
    ) -> Submission:
        """Like :meth:`asubmit` for calls whose verdicts were already computed."""
        sub = Submission(calls, verdicts)
        review = [(c, v) for c, v in zip(calls, verdicts, strict=True) if v.needs_approval]
        if not review:
            return sub
        await self.astart()
        request = self._build_request(review, ctx, inquiry)
        created_event = AuditEvent(
            event="created",
            at=request.created_at,
            request_id=request.id,
            thread=request.thread,
            principal=ctx.principal.id,
            agent=ctx.agent,
            policy_hash=request.policy_hash,
            data={
                "calls": [
                    {"tool_call_id": a.tool_call_id, "tool": a.name, "rule": a.rule}
                    for a in request.action_requests
                ],
                "kind": request.kind,
            },
        )
        stored, created = await self._create(request, [created_event])
        sub.request, sub.created = stored, created
        if not created:
            return sub
        self._poke_sweeper()
        if not self.interactive:
            tr = await self._update(
                stored.id,
                lambda r: system_resolve(
                    r,
                    "rejected",
                    actor="non-interactive",
                    now=utcnow(),
                    message="no human is available to approve (non-interactive mode)",
                ),
            )
            sub.request = tr.request
            return sub
        if self.auto_approve:
            outcome: Literal["approved", "rejected"] = "rejected" if inquiry else "approved"
            tr = await self._update(
                stored.id,
                lambda r: system_resolve(
                    r,
                    outcome,
                    actor="yolo",
                    now=utcnow(),
                    message="approved automatically (yolo mode)"
                    if outcome == "approved"
                    else "no human is available to answer (yolo mode)",
                ),
            )
            sub.request = tr.request
            return sub
        sub.request = await self._apply_thread_grants(stored) or stored
        if sub.request.pending:
            await self._notify(sub.request)
        return sub

    async def _create(
        self, request: ApprovalRequest, events: list[AuditEvent]
    ) -> tuple[ApprovalRequest, bool]:
        """Store the request with its notification outbox rows (one transaction when the
        store has a durable outbox). No prompts when nobody will be asked."""
        delivery = self.delivery
        if delivery is None or not self.interactive or self.auto_approve:
            return await self.store.create_request(request, events)
        try:
            outbox = delivery.plan(request)
        except Exception:
            log.exception("planning notifications for %s failed", request.id)
            outbox = []
        if delivery.durable:
            from signoff.store.base import OutboxStore

            assert isinstance(self.store, OutboxStore)
            stored, created = await self.store.create_request(request, events, outbox=outbox)
        else:
            stored, created = await self.store.create_request(request, events)
            if created:
                await delivery.outbox.enqueue_outbox(outbox)
        if created and outbox:
            delivery.poke()
        return stored, created

    def _build_request(
        self, review: list[tuple[ToolCall, Verdict]], ctx: CallContext, inquiry: Inquiry | None
    ) -> ApprovalRequest:
        now = utcnow()
        specs: list[ReviewSpec] = [v.review or ReviewSpec() for _c, v in review]
        timeout = min(s.timeout_s for s in specs)
        escalate_at = None
        escalating = [s for s in specs if s.on_timeout == "escalate"]
        if escalating:
            after = min(s.escalate_after_s or s.timeout_s / 2 for s in escalating)
            escalate_at = now + timedelta(seconds=after)
        actions, configs, states = [], [], []
        for (call, verdict), spec in zip(review, specs, strict=True):
            info = self.tools.get(call.name)
            actions.append(
                ActionRequest(
                    name=call.name,
                    args=dict(call.args),
                    tool_call_id=call.id,
                    rule=verdict.rule,
                    reason=verdict.reason,
                    risk=verdict.risk,
                    description=verdict.description or spec.description,
                )
            )
            configs.append(
                ReviewConfig.of(
                    call.id,
                    call.name,
                    spec,
                    info.schema.json_schema if info and info.schema else None,
                )
            )
            states.append(
                CallState(
                    tool_call_id=call.id,
                    quorum=spec.approvers.quorum,
                    action=Action(name=call.name, args=dict(call.args)),
                )
            )
        return ApprovalRequest(
            id=new_id("req"),
            kind="inquiry" if inquiry else "tool_call",
            thread=ctx.thread,
            agent=ctx.agent,
            principal=PrincipalInfo(id=ctx.principal.id, roles=sorted(ctx.principal.roles)),
            environment=ctx.environment,
            user_request=ctx.user_request,
            reasoning=ctx.reasoning,
            attrs=_jsonable(ctx.attrs),
            action_requests=actions,
            review_configs=configs,
            calls=states,
            created_at=now,
            expires_at=now + timedelta(seconds=timeout),
            escalate_at=escalate_at,
            policy_hash=review[0][1].policy_hash,
            inquiry=inquiry,
        )

    async def _granted_tools(self, grants: Sequence[ThreadGrant]) -> dict[tuple[str, str], str]:
        """The tool each thread grant was given for (read from the granting request)."""
        tools: dict[tuple[str, str], str] = {}
        for grant in grants:
            source = await self.store.get_request(grant.request_id)
            if source is None:
                continue
            try:
                tools[(grant.request_id, grant.tool_call_id)] = source.action_request(
                    grant.tool_call_id
                ).name
            except KeyError:
                continue
        return tools

    async def _apply_thread_grants(self, req: ApprovalRequest) -> ApprovalRequest | None:
        grants = await self.store.thread_grants(req.thread)
        if not grants:
            return None
        granted_tools = await self._granted_tools(grants)
        latest: ApprovalRequest | None = None
        for call, cfg in zip(req.calls, req.review_configs, strict=True):
            for grant in grants:
                if granted_tools.get((grant.request_id, grant.tool_call_id)) != cfg.action_name:
                    continue  # a grant covers later calls of the same tool only
                roles = self.policy.roles_of(grant.approver)
                if not cfg.allow_thread_approval or cfg.approvers.quorum > 1:
                    continue
                if may_decide(cfg, req, grant.approver, roles) is not None:
                    continue
                if cfg.forbid_self_approval and grant.approver == req.principal.id:
                    continue
                record = DecisionRecord(
                    tool_call_id=call.tool_call_id,
                    type="approve",
                    approver=grant.approver,
                    channel="thread_grant",
                    at=utcnow(),
                    message=f"approved for the whole thread in request {grant.request_id}",
                )

                def mutate(
                    r: ApprovalRequest,
                    record: DecisionRecord = record,
                    roles: frozenset[str] = roles,
                ) -> Transition:
                    tr = apply_decisions(r, [record], approver_roles=roles, now=utcnow())
                    for ev in tr.events:
                        if ev.event == "decided":
                            ev.event = "auto_approved"
                    return tr

                tr = await self._update(req.id, mutate)
                await self._queue_notifications(tr)
                latest = tr.request
                break
        return latest

    async def _notify(self, req: ApprovalRequest) -> None:
        from signoff.channels import wants

        for channel in self.channels:
            if not wants(req, channel.name):
                continue
            try:
                await channel.notify(req, self)
            except Exception as exc:
                log.warning("channel %s failed to notify: %s", channel.name, exc)
                await self.store.append_audit(
                    [
                        AuditEvent(
                            event="notification_failed",
                            request_id=req.id,
                            thread=req.thread,
                            actor=channel.name,
                            data={"error": str(exc)},
                        )
                    ]
                )
            else:
                await self.store.append_audit(
                    [
                        AuditEvent(
                            event="notified",
                            request_id=req.id,
                            thread=req.thread,
                            actor=channel.name,
                        )
                    ]
                )

    # ------------------------------------------------------------------ wait
    async def await_request(self, request_id: str, timeout: float | None = None) -> ApprovalRequest:
        """Wait until the request is resolved, expired or cancelled (or ``timeout`` passes).

        Wakes on the store's push (no polling); applies the deadline itself if it passes
        while waiting, so expiry never depends on the sweeper for a live waiter.
        """
        await self.astart()
        loop = asyncio.get_running_loop()
        give_up = None if timeout is None else loop.time() + timeout
        while True:
            req = await self._get(request_id)
            if req.terminal:
                return req
            until_due = max(0.0, (req.due_at - utcnow()).total_seconds())
            budget = until_due + 0.05
            if give_up is not None:
                remaining = give_up - loop.time()
                if remaining <= 0:
                    return req
                budget = min(budget, remaining)
            req = await self.store.wait(request_id, timeout=budget)
            if req.terminal:
                return req
            if utcnow() >= req.due_at:
                tr = await self._update(request_id, _due_mutation)
                await self._after_change(tr)

    def wait(self, request_id: str, timeout: float | None = None) -> ApprovalRequest:
        return self._portal.run(self.await_request(request_id, timeout))

    async def _get(self, request_id: str) -> ApprovalRequest:
        from signoff.model import NotFound

        req = await self.store.get_request(request_id)
        if req is None:
            raise NotFound(f"no approval request {request_id!r}")
        return req

    async def get(self, request_id: str) -> ApprovalRequest:
        await self.astart()
        return await self._get(request_id)

    # ------------------------------------------------------------------ decide
    async def adecide(
        self,
        request_id: str,
        decisions: Sequence[Decision | Mapping[str, Any]],
        *,
        approver: str | None = None,
        channel: str = "api",
        approver_roles: Iterable[str] | None = None,
    ) -> ApprovalRequest:
        """Record one approver's decisions; validated fully before anything is stored.

        Raises :class:`DecisionError` (which field, why), :class:`NotAuthorized`,
        :class:`AlreadyDecided` (by whom, when) — and the request stays as it was.
        """
        await self.astart()
        who = approver or self.default_approver
        if not who:
            raise DecisionError("say who decides (approver)", field="approver")
        self._check_known_person(who)
        roles = (
            frozenset(approver_roles) if approver_roles is not None else self.policy.roles_of(who)
        )
        parsed = _parse_decisions(decisions)

        def mutate(fresh: ApprovalRequest) -> Transition:
            # Validated against the freshest row inside the write transaction: one store
            # round trip instead of a read then a write, and positional decisions line up
            # with what is pending *now*. Raising here stores nothing.
            records = self.validate_decisions(fresh, parsed, approver=who, channel=channel)
            return apply_decisions(fresh, records, approver_roles=roles, now=utcnow())

        tr = await self._update(request_id, mutate)
        await self._after_change(tr)
        return tr.request

    def decide(
        self,
        request_id: str,
        decisions: Sequence[Decision | Mapping[str, Any]],
        *,
        approver: str | None = None,
        channel: str = "api",
        approver_roles: Iterable[str] | None = None,
    ) -> ApprovalRequest:
        return self._portal.run(
            self.adecide(
                request_id,
                decisions,
                approver=approver,
                channel=channel,
                approver_roles=approver_roles,
            )
        )

    def _check_known_person(self, who: str) -> None:
        if self.policy.people and who not in self.policy.people:
            raise NotAuthorized(
                f"{who!r} is not in the people: directory of this policy; "
                f"known: {', '.join(sorted(self.policy.people))}",
                field="approver",
            )

    def validate_decisions(
        self,
        req: ApprovalRequest,
        decisions: Sequence[Decision | Mapping[str, Any]],
        *,
        approver: str,
        channel: str,
    ) -> list[DecisionRecord]:
        """Parse and check decisions against the request without storing anything."""
        parsed = _parse_decisions(decisions)
        targets = _assign_call_ids(req, parsed)
        now = utcnow()
        records = []
        for i, (d, call_id) in enumerate(zip(parsed, targets, strict=True)):
            where = f"decisions[{i}]"
            if call_id not in {c.tool_call_id for c in req.calls}:
                raise DecisionError(
                    f"no call {call_id!r} in request {req.id}; calls: "
                    + ", ".join(c.tool_call_id for c in req.calls),
                    field=f"{where}.tool_call_id",
                )
            cfg = req.config(call_id)
            if d.type not in cfg.allowed_decisions:
                raise DecisionError(
                    f"decision type {d.type!r} is not allowed for {cfg.action_name}; "
                    f"allowed: {', '.join(cfg.allowed_decisions)}",
                    field=f"{where}.type",
                )
            if d.type == "edit":
                self._check_edit(req, call_id, d, where)
            elif d.edited_action is not None:
                raise DecisionError(
                    "edited_action is only valid with type 'edit'", field=f"{where}.edited_action"
                )
            if d.type == "respond" and not (d.message or "").strip():
                raise DecisionError(
                    "a respond decision needs the answer in `message`", field=f"{where}.message"
                )
            if d.scope == "thread" and d.type != "approve":
                raise DecisionError(
                    "scope 'thread' is only valid on an approve decision", field=f"{where}.scope"
                )
            if d.scope == "thread" and not cfg.allow_thread_approval:
                raise DecisionError(
                    f"the policy forbids approving {cfg.action_name} for the "
                    "whole thread (allow_thread_approval: false)",
                    field=f"{where}.scope",
                )
            records.append(
                DecisionRecord(
                    tool_call_id=call_id,
                    type=d.type,
                    edited_action=d.edited_action,
                    message=d.message,
                    scope=d.scope,
                    approver=approver,
                    channel=channel,
                    at=now,
                )
            )
        return records

    def _check_edit(self, req: ApprovalRequest, call_id: str, d: Decision, where: str) -> None:
        original = req.action_request(call_id)
        cfg = req.config(call_id)
        edited = d.edited_action
        if edited is None:
            raise DecisionError(
                "an edit needs edited_action {name, args}", field=f"{where}.edited_action"
            )
        if edited.name != original.name:
            raise DecisionError(
                f"an edit cannot switch tools ({original.name} → {edited.name})",
                field=f"{where}.edited_action.name",
            )
        for key in sorted(set(original.args) | set(edited.args)):
            if original.args.get(key, _MISSING) != edited.args.get(
                key, _MISSING
            ) and not cfg.may_edit(key):
                raise DecisionError(
                    f"argument {key!r} of {original.name} may not be edited; editable: "
                    + (", ".join(cfg.editable_args) or "none"),
                    field=f"{where}.edited_action.args.{key}",
                )
        info = self.tools.get(original.name)
        schema = (
            info.schema
            if info and info.schema
            else (schema_for(cfg.args_schema) if cfg.args_schema else None)
        )
        if schema is not None:
            errors = schema.errors(edited.args)
            if errors:
                raise DecisionError(
                    "edited arguments do not match the tool's schema: " + "; ".join(errors),
                    field=f"{where}.edited_action.args",
                )
        ctx = request_context(req, self.policy)
        verdict = self.check(ToolCall(original.name, edited.args, id=call_id), ctx, audit=False)
        if verdict.denied:
            raise DecisionError(
                f"the edited call is denied by rule {verdict.rule}: {verdict.reason}; "
                "edit it differently or reject it",
                field=f"{where}.edited_action.args",
            )

    # ------------------------------------------------------------------ cancel
    async def acancel(
        self, request_id: str, *, actor: str = "system", reason: str | None = None
    ) -> ApprovalRequest:
        await self.astart()
        tr = await self._update(
            request_id, lambda r: cancel(r, actor=actor, reason=reason, now=utcnow())
        )
        await self._after_change(tr)
        return tr.request

    def cancel(
        self, request_id: str, *, actor: str = "system", reason: str | None = None
    ) -> ApprovalRequest:
        return self._portal.run(self.acancel(request_id, actor=actor, reason=reason))

    # ------------------------------------------------------------------ execution ledger
    async def aclaim(self, request_id: str, call_id: str, *, actor: str | None = None) -> None:
        """Mark an approved call ``executing``; raises AlreadyExecuted on a second claim."""
        await self._update(
            request_id, lambda r: mark_execution(r, call_id, "executing", now=utcnow(), actor=actor)
        )

    async def afinish(
        self, request_id: str, call_id: str, *, error: str | None = None, actor: str | None = None
    ) -> None:
        step: Literal["executed", "failed"] = "failed" if error is not None else "executed"
        await self._update(
            request_id,
            lambda r: mark_execution(r, call_id, step, now=utcnow(), error=error, actor=actor),
        )

    async def arun_approved(
        self,
        req: ApprovalRequest,
        call_id: str,
        run: Callable[[dict[str, Any]], Awaitable[Any]],
        ctx: CallContext | None = None,
    ) -> Any:
        """Run an approved/edited call exactly once with its final arguments."""
        result = await run_once(req, call_id, run, claim=self.aclaim, finish=self.afinish)
        call = req.call(call_id)
        self.record_execution(
            ToolCall(call.action.name, call.action.args, id=call_id),
            ctx or request_context(req, self.policy),
        )
        return result

    # ------------------------------------------------------------------ inquiries
    async def aask(
        self,
        question: str,
        *,
        choices: Sequence[str] | None = None,
        default_answer: str | None = None,
        timeout: float = 3600.0,
        approvers: ReviewSpec | None = None,
        ctx: CallContext | None = None,
        wait: bool = True,
    ) -> str | ApprovalRequest:
        """Ask a human a question; returns the answer (a ``respond`` decision).

        Raises :class:`Rejected` when declined, :class:`Expired` at the deadline. With
        ``wait=False`` returns the stored inquiry request at once.
        """
        from signoff.gate.guard import raise_for

        ctx = ctx if ctx is not None else current_context()
        spec = approvers or ReviewSpec(
            allowed_decisions=("respond", "reject"),
            forbid_self_approval=False,
            timeout_s=timeout,
            description=question,
        )
        call = ToolCall(
            "ask_human",
            {
                "question": question,
                "choices": list(choices or []),
                "default_answer": default_answer,
            },
        )
        verdict = Verdict.require_approval(
            "inquiry", spec, policy_hash=self.policy.short_hash, description=question
        )
        sub = await self.asubmit_checked(
            [call],
            [verdict],
            ctx,
            inquiry=Inquiry(
                question=question,
                choices=list(choices) if choices else None,
                default_answer=default_answer,
            ),
        )
        assert sub.request is not None
        if not wait:
            return sub.request
        req = await self.await_request(sub.request.id)
        state = req.call(call.id)
        if state.resolution == "responded":
            return state.message or ""
        raise_for(req, state)
        raise AssertionError("unreachable")

    def ask(self, question: str, **kwargs: Any) -> str | ApprovalRequest:
        return self._portal.run(self.aask(question, **kwargs))

    # ------------------------------------------------------------------ listing
    async def alist(
        self,
        *,
        status: str | None = None,
        thread: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[ApprovalRequest]:
        await self.astart()
        return await self.store.list_requests(
            status=status, thread=thread, kind=kind, limit=limit, offset=offset
        )

    # ------------------------------------------------------------------ internals
    async def _update(
        self, request_id: str, mutate: Callable[[ApprovalRequest], Transition]
    ) -> Transition:
        try:
            return await self.store.update_request(request_id, mutate)
        except SignoffError:
            raise
        except Exception as exc:
            raise StoreError(f"store failed while updating {request_id}: {exc}") from exc

    async def _queue_notifications(self, tr: Transition) -> None:
        """Escalation notices, message updates and events for a change: queued in the
        outbox, never fatal."""
        if self.delivery is None or not tr.changed:
            return
        try:
            await self.delivery.on_change(tr)
        except Exception:
            log.exception("queueing notifications for %s failed", tr.request.id)

    async def _after_change(self, tr: Transition) -> None:
        if not tr.changed:
            return
        await self._queue_notifications(tr)
        if tr.request.pending:
            return
        for channel in self.channels:
            try:
                await channel.resolved(tr.request, self)
            except Exception as exc:
                log.warning("channel %s failed to update: %s", channel.name, exc)


_MISSING = object()


def _due_mutation(r: ApprovalRequest) -> Transition:
    return due_transition(r, utcnow()) or Transition(r, changed=False)


def _jsonable(attrs: Mapping[str, Any]) -> dict[str, Any]:
    import json

    return dict(json.loads(json.dumps(dict(attrs), default=str)))


def _parse_decisions(decisions: Sequence[Decision | Mapping[str, Any]]) -> list[Decision]:
    if isinstance(decisions, Mapping):
        raise DecisionError("expected a list of decisions", field="decisions")
    parsed = []
    for i, d in enumerate(decisions):
        if isinstance(d, Decision):
            parsed.append(d)
            continue
        try:
            parsed.append(Decision.model_validate(d))
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise DecisionError(
                err["msg"], field=f"decisions[{i}]" + (f".{loc}" if loc else "")
            ) from None
    if not parsed:
        raise DecisionError("no decisions given", field="decisions")
    return parsed


def _assign_call_ids(req: ApprovalRequest, decisions: list[Decision]) -> list[str]:
    """Keyed decisions keep their ids; a positional list must answer every call (LangChain
    semantics) or every call still awaiting a decision."""
    keyed = [d.tool_call_id for d in decisions]
    if all(k is not None for k in keyed):
        return [k for k in keyed if k is not None]
    if any(k is not None for k in keyed):
        raise DecisionError(
            "mix of keyed and positional decisions; give tool_call_id on all or none",
            field="decisions",
        )
    all_ids = [c.tool_call_id for c in req.calls]
    pending = req.pending_call_ids
    if len(decisions) == len(all_ids):
        return all_ids
    if len(decisions) == len(pending):
        return pending
    raise DecisionError(
        f"number of decisions ({len(decisions)}) does not match the number of "
        f"calls awaiting a decision ({len(pending)})",
        field="decisions",
    )


def request_context(req: ApprovalRequest, policy: Policy) -> CallContext:
    """Rebuild the call context a request was made in (for re-checking edited calls)."""
    return CallContext(
        principal=policy.principal(req.principal.id, req.principal.roles),
        thread=req.thread,
        agent=req.agent,
        environment=req.environment,
        user_request=req.user_request,
        reasoning=req.reasoning,
        attrs=req.attrs,
    )


def resolve_config_path(path: str | os.PathLike[str] | None) -> Path:
    if path is not None:
        return Path(path)
    env = os.environ.get(CONFIG_ENV)
    return Path(env) if env else Path("signoff.yaml")


__all__ = [
    "Gate",
    "Submission",
    "ToolInfo",
    "Validator",
    "messages",
    "request_context",
    "resolve_config_path",
]
