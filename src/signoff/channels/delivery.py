"""The outbox worker: delivers every planned message at least once.

It runs on the gate's loop next to the sweeper: claim due rows under a lease, check the
request (a prompt for a decided request is cancelled, never sent), send, complete.
Timeouts and 408/425/429/5xx are retried with capped exponential backoff and full jitter,
or after the provider's ``Retry-After``; permanent errors and exhausted retries are
audited as ``notification_failed``. A worker killed mid-send leaves its rows leased; they
are claimed again when the lease ends (at least once, never lost). What to send is planned
by :mod:`signoff.channels.outbox`; the gate calls :meth:`Delivery.plan` when it creates a
request and :meth:`Delivery.on_change` after every committed change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from signoff._failing import Failing
from signoff.channels import DeliveryError, Messenger, Outgoing, Receiver, Target
from signoff.channels.config import ChannelsConfig, parse
from signoff.channels.outbox import Planner
from signoff.channels.redact import Redactor
from signoff.model import ApprovalRequest, AuditEvent, RequestQuarantined, Transition, utcnow
from signoff.store._outbox_memory import MemoryOutbox
from signoff.store.base import PROMPT_KINDS, Outbox, OutboxItem, OutboxOutcome, OutboxStore

if TYPE_CHECKING:
    import httpx

    from signoff.channels.host import GateHandle

log = logging.getLogger("signoff.channels")

#: Changes of a request that prompt nobody but webhook subscribers may ask to hear of.
#: (``grant_revoked`` and ``grant_expired`` belong to no request: not sent through the outbox.)
TOLD_EVENTS = ("grant_created", "reattached", "reconciled")


class Links(Protocol):
    """Issues personal one-click links (the server's ``LinkIssuer``)."""

    async def decision_link(self, request_id: str, approver: str, decision: Any = ...) -> str: ...


@dataclass(frozen=True, slots=True)
class DeliverySettings:
    """Lease, retry and pacing of the worker (``channels.delivery`` in signoff.yaml)."""

    lease_s: float = 60.0
    max_attempts: int = 10
    backoff_s: float = 1.0
    backoff_cap_s: float = 300.0
    timeout_s: float = 15.0
    poll_s: float = 1.0
    claim_limit: int = 50
    concurrency: int = 16
    remind_before_s: tuple[float, ...] = ()

    def backoff(self, attempts: int) -> float:
        """Full jitter: uniform(0, min(cap, base · 2^(attempts−1)))."""
        ceiling = min(self.backoff_cap_s, self.backoff_s * 2 ** max(0, attempts - 1))
        return random.uniform(0, ceiling)


class Delivery:
    """Plans outbox rows for a gate's messengers and runs the worker that sends them."""

    def __init__(
        self,
        gate: GateHandle,
        messengers: Sequence[Messenger],
        settings: DeliverySettings | None = None,
        *,
        public_url: str | None = None,
    ) -> None:
        self.gate = gate
        self.messengers = {m.name: m for m in messengers}
        self.settings = settings or DeliverySettings()
        store = gate.store
        self.outbox: Outbox
        if isinstance(store, OutboxStore):
            self.outbox, self.durable = store, True
        else:
            self.outbox, self.durable = MemoryOutbox(), False
            log.warning(
                "store %s has no durable outbox: notifications are kept in memory and are "
                "lost if this process stops before sending them",
                store.url,
            )
        self.planner = Planner(self.messengers, gate.policy.people, self.settings.remind_before_s)
        self.redact = Redactor.from_policy(gate.policy)
        self.links: Links | None = None
        self.base_url: Callable[[], str | None] = lambda: public_url
        self.sent = 0
        self.failed = 0
        self.failed_by_channel: Counter[str] = Counter()  # for /metrics
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._grace_s = 5.0
        self._inflight: set[asyncio.Future[None]] = set()
        self._http: httpx.AsyncClient | None = None

    # ------------------------------------------------------------------ wiring
    def use_links(self, links: Links, base_url: Callable[[], str | None]) -> None:
        """Inside ``signoff serve``: personal links and the server's public URL."""
        self.links = links
        self.base_url = base_url

    def senders(self) -> list[str]:
        """The messengers this process can send for (their secrets are set)."""
        return [name for name, m in self.messengers.items() if m.ready() is None]

    def missing(self) -> dict[str, str]:
        return {name: why for name, m in self.messengers.items() if (why := m.ready())}

    def receiver(self, name: str) -> Receiver | None:
        """The channel that takes callbacks at ``/hooks/<name>``, if configured."""
        found = self.messengers.get(name)
        return found if isinstance(found, Receiver) else None

    # ------------------------------------------------------------------ planning
    def plan(self, req: ApprovalRequest) -> list[OutboxItem]:
        """Rows for a new request (written by the gate with the request)."""
        return self.planner.created(req, utcnow())

    def in_commit(self, tr: Transition) -> list[OutboxItem]:
        """The rows a change announces that need no read — an escalation's prompts for the
        next group, a chain's new stage's or a re-routed edit's prompts, events subscribers
        follow — planned inside the change's transaction and stored by its commit
        (``Transition.outbox``), so a crash right after the commit cannot lose them. None
        with the stand-in outbox (the store cannot write them): :meth:`on_change` queues
        them then."""
        return self._announced(tr) if self.durable else []

    def _announced(self, tr: Transition) -> list[OutboxItem]:
        req = tr.request
        now = utcnow()
        items: list[OutboxItem] = []
        kinds = {e.event for e in tr.events}
        if req.pending and "escalated" in kinds:
            items += self.planner.escalated(req, now)
        if req.pending and "edit_rerouted" in kinds:  # asks the new rule's (first) stage
            items += self.planner.rerouted(req, now)
        elif req.pending and "stage_started" in kinds:
            items += self.planner.stage_started(req, now)
        for told in TOLD_EVENTS:
            if told in kinds:
                items += self.planner.told(req, told, now)
        return items

    async def on_change(self, tr: Transition) -> None:
        """After a committed change: what its commit did not store (:meth:`in_commit`), and
        on resolution pending prompts cancelled and every sent message updated (these read
        the outbox, so they are queued here, after the commit)."""
        req = tr.request
        # nothing stored by the commit: the stand-in outbox, or the planning failed there
        items = [] if tr.outbox else self._announced(tr)
        if req.terminal:
            await self.outbox.cancel_outbox_for(req.id)
            items += self.planner.resolved(req, await self.outbox.outbox_for(req.id), utcnow())
        if items:
            await self.outbox.enqueue_outbox(items)
            self.poke()

    # ------------------------------------------------------------------ worker
    def poke(self) -> None:
        """Wake the worker now (thread-safe; from any loop)."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            loop.call_soon_threadsafe(wake.set)

    async def run(self) -> None:
        """The worker loop; runs until :meth:`stop`.

        Each claimed row is sent by its own task (at most ``concurrency`` at once), and
        the loop claims again as soon as there is room, so one slow provider never holds
        up the others' messages."""
        import httpx

        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        names = self.senders()
        for name, why in self.missing().items():
            log.info("channel %s does not send from this process: %s", name, why)
        if not names:
            return
        timeout = httpx.Timeout(self.settings.timeout_s, connect=min(5.0, self.settings.timeout_s))
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as http:
            self._http = http
            try:
                await self._loop_until_stopped(names)
            finally:
                await self._drain()

    async def _loop_until_stopped(self, names: Sequence[str]) -> None:
        assert self._wake is not None
        failing = Failing(log, "delivery pass")
        while not self._stopping:
            self._wake.clear()
            try:
                room = self.settings.concurrency - len(self._inflight)
                if room > 0 and await self._claim_into_tasks(names, room) >= room:
                    continue  # maybe more is due
                nxt = await self.outbox.next_outbox_at(names)
            except Exception as exc:
                failing.failed(exc)
                nxt = None
            else:
                failing.worked()
            delay = self.settings.poll_s
            if nxt is not None:
                delay = max(0.0, min(delay, (nxt - utcnow()).total_seconds()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=delay)

    async def _claim_into_tasks(self, names: Sequence[str], room: int) -> int:
        claimed = await self.outbox.claim_outbox(
            utcnow(),
            limit=min(room, self.settings.claim_limit),
            lease_s=self.settings.lease_s,
            channels=names,
        )
        for item in claimed:
            task = asyncio.ensure_future(self.deliver(item))
            self._inflight.add(task)
            task.add_done_callback(self._finished)
        return len(claimed)

    def _finished(self, task: asyncio.Future[None]) -> None:
        self._inflight.discard(task)
        if self._wake is not None:
            self._wake.set()  # room for more

    async def _drain(self) -> None:
        """Let in-flight sends finish (up to the grace period), then cancel the rest; a
        cancelled send gives its row back at once."""
        if self._inflight:
            await asyncio.wait(set(self._inflight), timeout=self._grace_s)
        for task in list(self._inflight):
            task.cancel()
        if self._inflight:
            await asyncio.wait(set(self._inflight), timeout=2.0)

    async def stop(self, task: asyncio.Future[None], grace_s: float = 5.0) -> None:
        """Stop claiming, let in-flight sends finish (up to ``grace_s``), end the worker."""
        self._stopping = True
        self._grace_s = grace_s
        self.poke()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError, Exception):
            await asyncio.wait_for(asyncio.shield(task), timeout=grace_s + 3.0)
        while not task.done():
            task.cancel()
            await asyncio.wait([task], timeout=0.1)

    async def run_once(self, names: Sequence[str] | None = None) -> int:
        """Claim the due rows once and deliver them; returns how many were claimed."""
        names = self.senders() if names is None else names
        claimed = await self.outbox.claim_outbox(
            utcnow(),
            limit=self.settings.claim_limit,
            lease_s=self.settings.lease_s,
            channels=names,
        )
        if not claimed:
            return 0
        gate = asyncio.Semaphore(self.settings.concurrency)

        async def one(item: OutboxItem) -> None:
            async with gate:
                await self.deliver(item)

        await asyncio.gather(*(one(item) for item in claimed))
        return len(claimed)

    async def deliver(self, item: OutboxItem) -> None:
        """Send one claimed row and record the result; never raises (but cancellation)."""
        try:
            await self._deliver(item)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):  # give the row back at once
                await asyncio.shield(
                    self.outbox.retry_outbox(item.id, next_at=utcnow(), error="interrupted")
                )
            raise
        except Exception:
            log.exception("delivering %s failed", item.id)

    async def _deliver(self, item: OutboxItem) -> None:
        m = self.messengers.get(item.channel)
        try:
            req = await self.gate.store.get_request(item.request_id)
        except RequestQuarantined as exc:  # unreadable: the store logged it; nothing to send
            await self.outbox.complete_outbox(item.id, status="cancelled", error=exc.reason)
            return
        if m is None or req is None:
            why = "no such request" if req is None else f"channel {item.channel} not configured"
            await self.outbox.complete_outbox(item.id, status="cancelled", error=why)
            return
        if item.kind in PROMPT_KINDS and not req.pending:
            await self.outbox.complete_outbox(
                item.id, status="cancelled", error=f"request already {req.status}"
            )
            return
        if item.kind == "reminder" and any(d.approver == item.person for d in req.decisions):
            await self.outbox.complete_outbox(
                item.id, status="cancelled", error=f"{item.person} already decided"
            )
            return
        message = await self._outgoing(item, req, m)
        http = self._http
        if http is None:  # run_once driven directly (tests, tools)
            import httpx

            async with httpx.AsyncClient(timeout=self.settings.timeout_s) as client:
                await self._send(item, req, m, message, client)
        else:
            await self._send(item, req, m, message, http)

    async def _send(
        self,
        item: OutboxItem,
        req: ApprovalRequest,
        m: Messenger,
        message: Outgoing,
        http: httpx.AsyncClient,
    ) -> None:
        try:
            if item.kind == "update":
                await m.update(message, dict(item.data.get("ref") or {}), http)
                ref = None
            else:
                ref = await m.send(message, http)
        except DeliveryError as exc:
            await self._failed(item, req, exc)
            return
        except Exception as exc:  # a bug in a channel: final, audited, never a crash
            log.exception("channel %s raised while sending", item.channel)
            await self._failed(
                item, req, DeliveryError(f"{type(exc).__name__}: {exc}", retryable=False)
            )
            return
        audited = item.kind in PROMPT_KINDS or item.kind == "event"
        await self._finish(item, req, "sent", ref=ref, event="notified" if audited else None)
        self.sent += 1
        if item.kind in PROMPT_KINDS and ref is not None:
            fresh = await self.gate.store.get_request(item.request_id)
            if fresh is not None and fresh.terminal:  # decided while we were sending
                update = self.planner.update_for(replace(item, status="sent", ref=ref), utcnow())
                if update is not None:
                    await self.outbox.enqueue_outbox([update])
                    self.poke()

    async def _outgoing(self, item: OutboxItem, req: ApprovalRequest, m: Messenger) -> Outgoing:
        base = self.base_url()
        review = None
        if m.personal_links and item.person and self.links and item.kind in PROMPT_KINDS:
            try:
                review = await self.links.decision_link(req.id, item.person, "review")
            except Exception as exc:
                log.warning("could not issue a link for %s: %s", item.person, exc)
        mentions = tuple(item.data.get("mentions") or ())
        return Outgoing(
            kind=item.kind,
            request=req,
            target=Target(item.recipient, item.person, mentions),
            key=item.id,
            redact=self.redact,
            page_url=f"{base.rstrip('/')}/requests/{req.id}" if base else None,
            review_link=review,
            event=item.data.get("event"),
            attempt=item.attempts,
            data=dict(item.data),
        )

    async def _failed(self, item: OutboxItem, req: ApprovalRequest, exc: DeliveryError) -> None:
        error = str(exc)
        if exc.retryable and item.attempts < self.settings.max_attempts:
            wait = exc.retry_after
            if wait is None:
                wait = self.settings.backoff(item.attempts)
            next_at = utcnow() + timedelta(seconds=wait)
            if item.kind not in PROMPT_KINDS or next_at < req.expires_at:
                await self.outbox.retry_outbox(item.id, next_at=next_at, error=error)
                log.info("retrying %s on %s in %.1f s: %s", item.kind, item.channel, wait, error)
                return
            error += " (no retry before the request's deadline)"
        await self._finish(item, req, "failed", error=error, event="notification_failed")
        self.failed += 1
        self.failed_by_channel[item.channel] += 1
        log.warning(
            "channel %s gave up on %s for %s: %s", item.channel, item.kind, item.request_id, error
        )

    async def _finish(
        self,
        item: OutboxItem,
        req: ApprovalRequest,
        status: OutboxOutcome,
        *,
        ref: dict[str, Any] | None = None,
        error: str | None = None,
        event: str | None = None,
    ) -> None:
        """Record the row's outcome and, with ``event``, its audit event: in one transaction
        on a durable store (a crash leaves both or neither); a stand-in outbox in memory has
        no audit log, so the store gets the event on its own."""
        audit = [self._audit_event(event, item, req, error)] if event else []
        if self.durable:
            await self.outbox.complete_outbox(
                item.id, status=status, ref=ref, error=error, audit=audit
            )
            return
        await self.outbox.complete_outbox(item.id, status=status, ref=ref, error=error)
        if audit:
            try:
                await self.gate.store.append_audit(audit)
            except Exception:
                log.exception("could not audit %s for %s", event, item.id)

    @staticmethod
    def _audit_event(
        event: str, item: OutboxItem, req: ApprovalRequest, error: str | None
    ) -> AuditEvent:
        data: dict[str, Any] = {"kind": item.kind, "to": item.person or "channel"}
        if item.kind == "event":
            data["event"] = item.data.get("event")
        if error is not None:
            data["error"] = error
            data["attempts"] = item.attempts
        return AuditEvent(
            event=event,  # type: ignore[arg-type]
            request_id=req.id,
            thread=req.thread,
            actor=item.channel,
            data=data,
        )


def settings_for(section: ChannelsConfig) -> DeliverySettings:
    """The worker's settings from a validated ``channels:`` section."""
    d = section.delivery
    return DeliverySettings(
        lease_s=d.lease,
        max_attempts=d.max_attempts,
        backoff_s=d.backoff,
        backoff_cap_s=d.backoff_cap,
        timeout_s=d.timeout,
        poll_s=d.poll,
        remind_before_s=tuple(sorted(set(section.remind_before), reverse=True)),
    )


def delivery_for(gate: GateHandle, messengers: Sequence[Messenger]) -> Delivery:
    """The gate's delivery worker, configured from its policy's ``channels:`` section."""
    section = gate.policy.sections.get("channels") or {}
    serve = gate.policy.sections.get("serve") or {}
    public = serve.get("public_url")
    return Delivery(
        gate,
        messengers,
        settings_for(parse(section)),
        public_url=public if isinstance(public, str) and public.startswith("http") else None,
    )
