"""The gate: the one runtime object every integration uses.

evaluate → (allow | deny | require_approval → persist → notify → wait → resolve) → run → record.

``Gate`` is a facade over small modules with one job each (the way httpx keeps one
``Client`` over private modules):

* :mod:`~signoff.gate.checking` — the check pipeline (limits → schema → validators → policy);
* :mod:`~signoff.gate.submission` — building, storing and announcing a request;
* :mod:`~signoff.gate.grants` — standing approvals: the check stage, its cache, the API;
* :mod:`~signoff.gate.waiting` — waiting for the outcome without polling;
* :mod:`~signoff.gate.decisions` — validating decisions and edits;
* :mod:`~signoff.gate.ledger` — running an approved call exactly once;
* :mod:`~signoff.gate.sweeper` — deadlines without a waiter;
* :mod:`~signoff.gate.inquiries` — asking a human a question;
* :mod:`~signoff.gate.wiring` — channels and remote gates, built by the composition root;
* mixins :mod:`~signoff.gate.lifecycle` (start/close), :mod:`~signoff.gate.changes` (one
  transaction and its follow-ups), :mod:`~signoff.gate.ledger` (claim/finish).

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
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from signoff.checks import schema_for
from signoff.checks.limits import Limits
from signoff.gate import decisions as _decisions
from signoff.gate import inquiries, messages, submission, waiting
from signoff.gate.changes import Changes
from signoff.gate.checking import Pipeline, ToolInfo, Validator, audit_verdict, default_pipeline
from signoff.gate.context import ContextMethods, current_context
from signoff.gate.decisions import request_context
from signoff.gate.granting import GrantMethods
from signoff.gate.grants import GrantCache, GrantSettings, GrantsStage
from signoff.gate.guard import guard as _guard
from signoff.gate.inquiry_judge import InquiryJudges
from signoff.gate.intent import IntentStage
from signoff.gate.intent import settle as settle_intent
from signoff.gate.ledger import LedgerMethods
from signoff.gate.lifecycle import Lifecycle
from signoff.gate.portal import Portal
from signoff.gate.ratelimit import RateWindows
from signoff.gate.reattach import waiter_id
from signoff.gate.settings import GateSettings, interactive_mode
from signoff.gate.submission import Submission
from signoff.gate.sweeper import Sweeper
from signoff.gate.wiring import DeliveryWorker, Notifier, build_channels, build_remote
from signoff.judges.runner import IntentChecker
from signoff.judges.settings import build_judges
from signoff.model import (
    Answers,
    ApprovalRequest,
    CallContext,
    Decision,
    DecisionRecord,
    Inquiry,
    NotFound,
    Question,
    ReviewSpec,
    Risk,
    ToolCall,
    Verdict,
    utcnow,
)
from signoff.model.inquiries import TextFormat
from signoff.model.resolution import cancel
from signoff.policy import Policy
from signoff.policy.redact import Redaction, audit_key
from signoff.store import MemoryStore, Store, open_store

log = logging.getLogger("signoff.gate")

T = TypeVar("T")
CONFIG_ENV = "SIGNOFF_CONFIG"


class Gate(Lifecycle, Changes, LedgerMethods, GrantMethods, ContextMethods):
    """Decides, asks, waits, runs and records — for one policy and one store."""

    def __init__(
        self,
        policy: Policy,
        store: Store | None = None,
        *,
        interactive: bool | None = None,
        channels: Sequence[Any] = (),
        sweep_interval: float | None = None,
        approver: str | None = None,
        auto_approve: bool = False,
    ) -> None:
        self.policy = policy
        self.settings = GateSettings.from_policy(policy)
        # Whether a human can be asked: the argument, else $SIGNOFF_NON_INTERACTIVE, else
        # gate.non_interactive.enabled (gate/settings.py: interactive_mode).
        self.interactive = interactive_mode(interactive, self.settings)
        self.store: Store = store if store is not None else open_store(policy.store_url)
        # yolo mode: calls that need approval are approved at once (audited, actor "yolo");
        # deny rules still apply, and questions (inquiries) get "no human available".
        self.auto_approve = auto_approve
        self.default_approver = approver
        self.tools: dict[str, ToolInfo] = {}
        self.rates = RateWindows()
        self.waiter_id = waiter_id()  # this process, as the holder of leases on requests
        self._steps_seen: set[tuple[str, str | None]] = set()
        self.sweeper = Sweeper(self, sweep_interval or self.settings.sweep_interval)
        self._rate_tools: dict[str, bool] = {}
        self._portal = Portal()
        self._start_lock = threading.Lock()
        self._started = False
        self._closed = False
        self._deliverer: asyncio.Future[None] | None = None
        self._writable = False  # the store passed check_writable (once per gate)
        # A runtime section's error names its key; the policy adds the file's line.
        with policy.locating():
            self.limits = Limits.from_sections(policy.sections)
            self.checks: Pipeline = default_pipeline(policy, self.rates, self.limits, self.store)
            self.grant_settings = GrantSettings.from_sections(policy.sections)
            self.grant_cache = GrantCache(policy)
            self.checks.add(GrantsStage(policy, self.grant_cache), after="policy")
            # Secret arguments: masked in audit events, sealed once a call is finished (the
            # key is audit.key, else the store's salt, read at start).
            self.redaction = Redaction(policy.secret_keys, audit_key(policy.sections))
            # Intent judges (judges: + intent: on tools/rules): an async stage after the rest.
            judges = build_judges(
                policy.sections.get("judges"),
                filename=policy.path.name if policy.path else "signoff.yaml",
            )
            self.intents = IntentChecker(judges, self.redaction, self.store)
            if self.intents.judges:
                self.checks.add_async(IntentStage(self.ajudge))
            # inquiries: judges that answer (fallback) or pre-fill (suggest) inquiries
            self.inquiry_judges = InquiryJudges.from_gate(self)
            # Channels from the policy's ``channels:`` section plus those passed in (which win
            # on a name clash). In-process channels are called directly; messengers (Slack,
            # email…) go through the store's outbox, sent by the delivery worker.
            built = build_channels(self, channels)
            self.channels: list[Notifier] = built.notifiers
            self.delivery: DeliveryWorker | None = built.delivery

    @property
    def sweep_interval(self) -> float:
        return self.sweeper.interval

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_config(cls, path: str | os.PathLike[str] | None = None, **kwargs: Any) -> Gate | Any:
        """Load ``signoff.yaml`` (default: ``$SIGNOFF_CONFIG`` or ``./signoff.yaml``).

        With a ``remote: {url, token}`` section the answer is a
        :class:`~signoff.client.RemoteGate` talking to ``signoff serve`` (same API).
        """
        policy = Policy.load(resolve_config_path(path))
        remote = policy.sections.get("remote")
        if remote:
            return build_remote(remote, **kwargs)
        return cls(policy, **kwargs)

    @classmethod
    def from_interrupt_on(
        cls, interrupt_on: Mapping[str, Any], *, store: Store | None = None, **kwargs: Any
    ) -> Gate:
        """LangChain's ``interrupt_on`` mapping as a gate (in-memory store unless given)."""
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
        return _guard(self, fn, **options)

    # ------------------------------------------------------------------ checks (hot path)
    def check(
        self,
        call: ToolCall,
        ctx: CallContext | None = None,
        *,
        risk: Risk | None = None,
        audit: bool = True,
    ) -> Verdict:
        """Every synchronous check stage, cheapest first; never raises (fails closed).

        Allowed and denied verdicts are audited through the batched writer when ``audit``.
        """
        if not self._writable:
            self._ensure_writable()
        ctx = ctx if ctx is not None else current_context()
        verdict = self.checks.run(call, ctx, self.tools.get(call.name), risk)
        if audit and not verdict.needs_approval and not verdict.judge_pending:
            audit_verdict(self.store, call, ctx, verdict, self.redaction)
        return verdict

    async def ajudge(
        self, call: ToolCall, ctx: CallContext, verdict: Verdict, *, audit: bool = True
    ) -> Verdict:
        """Finish a verdict whose intent judge is pending (``verdict.judge_pending``): the
        judge answers (or its cached answer) and the verdict can only get stricter. Other
        verdicts come back unchanged. A finished allow or deny is audited when ``audit``."""
        if not verdict.judge_pending:
            return verdict
        settled = await settle_intent(self.intents, call, ctx, verdict, self._on_portal)
        if audit and not settled.needs_approval:
            audit_verdict(self.store, call, ctx, settled, self.redaction)
        return settled

    async def ajudge_all(
        self, calls: Sequence[ToolCall], ctx: CallContext, verdicts: Sequence[Verdict]
    ) -> list[Verdict]:
        """:meth:`ajudge` for each call of a step (verdicts with no pending judge as they are)."""
        return [await self.ajudge(c, ctx, v) for c, v in zip(calls, verdicts, strict=True)]

    def judge(self, call: ToolCall, ctx: CallContext, verdict: Verdict) -> Verdict:
        """Sync twin of :meth:`ajudge` (for sync callers; blocks while the judge answers)."""
        if not verdict.judge_pending:
            return verdict
        return self._portal.run(self.ajudge(call, ctx, verdict))

    async def acheck(
        self,
        call: ToolCall,
        ctx: CallContext | None = None,
        *,
        risk: Risk | None = None,
        audit: bool = True,
    ) -> Verdict:
        """Like :meth:`check`, including the asynchronous stages (e.g. intent judges)."""
        if not self._writable:
            await self.ensure_writable()
        ctx = ctx if ctx is not None else current_context()
        verdict = await self.checks.arun(call, ctx, self.tools.get(call.name), risk)
        if audit and not verdict.needs_approval and not verdict.judge_pending:
            audit_verdict(self.store, call, ctx, verdict, self.redaction)
        return verdict

    def audit_verdict(self, call: ToolCall, ctx: CallContext, verdict: Verdict) -> None:
        """Audit an allow/deny decided outside :meth:`check` (e.g. by a framework predicate)."""
        audit_verdict(self.store, call, ctx, verdict, self.redaction)

    def counts_executions(self, tool: str) -> bool:
        """Whether the policy rate-limits ``tool``: only then are its executions counted."""
        windows = self._rate_tools.get(tool)
        if windows is None:
            windows = self._rate_tools[tool] = bool(self.policy.rate_windows(tool))
        return windows

    def record_execution(self, call: ToolCall, ctx: CallContext) -> None:
        """Count an executed call for the policy's rate limits (only tools that have them)."""
        if self.counts_executions(call.name):
            self.rates.record(call.name, ctx, utcnow())

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run one of the gate's coroutines from sync code (on the gate's own loop thread)."""
        return self._portal.run(coro)

    # ------------------------------------------------------------------ submit
    async def asubmit(
        self,
        calls: Sequence[ToolCall],
        ctx: CallContext | None = None,
        *,
        risk: Risk | None = None,
        reattach: bool | None = None,
    ) -> Submission:
        """Check one agent step's calls; store one request for those that need review.

        Allowed and denied calls are decided at once (and audited); the request, if any,
        holds every reviewable call of the step. Re-submitting the same (thread, call id)
        with the same arguments returns the existing request.
        """
        ctx = ctx if ctx is not None else current_context()
        submission.check_call_count(calls, self.limits)
        verdicts = [await self.acheck(c, ctx, risk=risk) for c in calls]
        return await self.asubmit_checked(list(calls), verdicts, ctx, reattach=reattach)

    def submit(
        self, calls: Sequence[ToolCall], ctx: CallContext | None = None, *, risk: Risk | None = None
    ) -> Submission:
        ctx = ctx if ctx is not None else current_context()
        submission.check_call_count(calls, self.limits)
        verdicts = [self.check(c, ctx, risk=risk) for c in calls]  # judges: in asubmit_checked
        return self._portal.run(self.asubmit_checked(list(calls), verdicts, ctx))

    async def asubmit_checked(
        self,
        calls: list[ToolCall],
        verdicts: list[Verdict],
        ctx: CallContext,
        *,
        inquiry: Inquiry | None = None,
        reattach: bool | None = None,
        request_id: str | None = None,
    ) -> Submission:
        """Like :meth:`asubmit` for calls whose verdicts were already computed.

        ``request_id`` stores the request under a known id: an integration rebuilding a
        request its checkpoint names, which this store never saw (a new process)."""
        return await submission.submit_checked(
            self, calls, verdicts, ctx, inquiry, reattach, request_id
        )

    def first_step(self, ctx: CallContext) -> bool:
        """Whether this is the first step this gate submits for (thread, agent)."""
        key = (ctx.thread, ctx.agent)
        if key in self._steps_seen:
            return False
        if len(self._steps_seen) > 100_000:  # bounded: a long-lived server sees many threads
            self._steps_seen.clear()
        self._steps_seen.add(key)
        return True

    # ------------------------------------------------------------------ wait
    async def await_request(
        self,
        request_id: str,
        timeout: float | None = None,
        *,
        current: ApprovalRequest | None = None,
    ) -> ApprovalRequest:
        """Wait until the request is resolved, expired or cancelled (or ``timeout`` passes).

        Wakes on the store's push (no polling); applies the deadline itself if it passes
        while waiting, so expiry never depends on the sweeper for a live waiter.
        ``current``: the request as the caller has just read it (saves a read).
        """
        await self.astart()
        return await waiting.await_request(self, request_id, timeout, current)

    def wait(self, request_id: str, timeout: float | None = None) -> ApprovalRequest:
        return self._portal.run(self.await_request(request_id, timeout))

    async def get(self, request_id: str) -> ApprovalRequest:
        await self.astart()
        return await self.fetch(request_id)

    async def fetch(self, request_id: str) -> ApprovalRequest:
        """The stored request (the gate already started); :class:`NotFound` if none."""
        req = await self.store.get_request(request_id)
        if req is None:
            raise NotFound(f"no approval request {request_id!r}")
        return req

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
        return await _decisions.decide(
            self,
            request_id,
            decisions,
            approver=approver or self.default_approver,
            channel=channel,
            approver_roles=approver_roles,
        )

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

    def validate_decisions(
        self,
        req: ApprovalRequest,
        decisions: Sequence[Decision | Mapping[str, Any]],
        *,
        approver: str,
        channel: str,
    ) -> list[DecisionRecord]:
        """Parse and check decisions against the request without storing anything."""
        return _decisions.validate_decisions(
            self, req, decisions, approver=approver, channel=channel
        )

    # ------------------------------------------------------------------ cancel
    async def acancel(
        self, request_id: str, *, actor: str = "system", reason: str | None = None
    ) -> ApprovalRequest:
        await self.astart()
        tr = await self.update(
            request_id, lambda r: cancel(r, actor=actor, reason=reason, now=utcnow())
        )
        await self.after_change(tr)
        return tr.request

    def cancel(
        self, request_id: str, *, actor: str = "system", reason: str | None = None
    ) -> ApprovalRequest:
        return self._portal.run(self.acancel(request_id, actor=actor, reason=reason))

    # ------------------------------------------------------------------ inquiries
    async def aask(
        self,
        question: str | None = None,
        *,
        choices: Sequence[str] | None = None,
        default_answer: str | None = None,
        allow_other: bool = False,
        questions: Sequence[Mapping[str, Any] | Question] | None = None,
        format: TextFormat = "text",
        timeout: float = 3600.0,
        approvers: ReviewSpec | None = None,
        ctx: CallContext | None = None,
        wait: bool = True,
    ) -> str | Answers | ApprovalRequest:
        """Ask a human a question; returns the answer (a ``respond`` decision).

        ``choices`` bind unless ``allow_other``. With ``questions`` (``[{id, question,
        choices?, multiple?, default_answer?, allow_other?}]``, one round) the answer is a dict
        keyed by question id (a list of strings where ``multiple``). ``format="markdown"`` lets
        the web inbox render the question text as (sanitized) markdown.

        Raises :class:`Rejected` when declined, :class:`Expired` at the deadline. With
        ``wait=False`` returns the stored inquiry request at once.
        """
        return await inquiries.ask(
            self,
            question,
            choices=choices,
            default_answer=default_answer,
            allow_other=allow_other,
            questions=questions,
            format=format,
            timeout=timeout,
            approvers=approvers,
            ctx=ctx if ctx is not None else current_context(),
            wait=wait,
        )

    def ask(self, question: str | None = None, **kwargs: Any) -> str | Answers | ApprovalRequest:
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
