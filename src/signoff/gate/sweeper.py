"""Deadlines hold without a waiter: expire or escalate every due request.

Runs on the gate's loop: once at start (what passed its deadline while nobody was running),
then whenever the next deadline comes or a new request pokes it. Rows are handled one by one,
so a row that fails to update is logged and skipped, never the end of a pass.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import suppress
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from signoff._failing import Failing
from signoff.model import ApprovalRequest, RequestQuarantined, utcnow
from signoff.model.resolution import Transition, due_transition

if TYPE_CHECKING:
    from signoff.gate.core import Gate

log = logging.getLogger("signoff.gate")

PAGE = 200  # due requests handled per store read


def due_mutation(r: ApprovalRequest) -> Transition:
    """Expire or escalate ``r`` if its time has come (a no-op otherwise)."""
    return due_transition(r, utcnow()) or Transition(r, changed=False)


def _claimed(tr: Transition) -> bool:
    return tr.changed and any(e.event == "fallback_asked" for e in tr.events)


class Sweeper:
    """The gate's deadline keeper; see the module docstring."""

    def __init__(self, gate: Gate, interval: float) -> None:
        self.gate = gate
        self.interval = interval
        self._task: asyncio.Future[None] | None = None
        self._wake: asyncio.Event | None = None
        # When the loop looks next, while it sleeps; None while a pass runs (poke always).
        self._wake_at: datetime | None = None
        self._reported: set[str] = set()
        self.pass_failing = Failing(log, "sweeper pass")
        self.grants_failing = Failing(log, "noting expired grants")

    async def sweep(self) -> int:
        """Expire or escalate every due request once; returns how many changed. Grants that
        reached their expiry are audited (``grant_expired``) on the way."""
        try:
            for grant in await self.gate.store.note_expired_grants(utcnow()):
                self.gate.grant_cache.drop(grant.id)
        except Exception as exc:
            self.grants_failing.failed(exc, retrying="retrying next pass")
        else:
            self.grants_failing.worked()
        changed = 0
        failed: set[str] = set()
        while True:
            # the rows that failed this pass come first again: ask past them, so a page of
            # rows that cannot be updated never hides the due rows behind it
            ids = await self.gate.store.due_requests(utcnow(), limit=PAGE + len(failed))
            ids = [i for i in ids if i not in failed]
            if not ids:
                return changed
            progressed = 0
            for request_id in ids:
                try:
                    tr = await self.gate.update(request_id, self._mutation)
                except RequestQuarantined:
                    failed.add(request_id)  # the store set it aside and said so once
                    continue
                except Exception:
                    # One bad row never stops the pass: skip it now, retry it next pass,
                    # and say so once per process rather than every second.
                    failed.add(request_id)
                    if request_id not in self._reported:
                        self._reported.add(request_id)
                        log.exception("sweeper could not update %s; skipping it", request_id)
                    continue
                if tr.changed:
                    changed += 1
                    progressed += 1
                    await self.gate.after_change(tr)
                if _claimed(tr):  # this process took the inquiry's fallback: ask its judge
                    self.gate.inquiry_judges.start(tr.request)
            if not progressed and not failed.intersection(ids):
                return changed  # nothing moved and nothing new failed: the rest is not due

    def _mutation(self, r: ApprovalRequest) -> Transition:
        """A deadline or escalation first; else the inquiry's fallback judge, if due."""
        tr = due_transition(r, utcnow())
        if tr is not None:
            return tr
        return self.gate.inquiry_judges.claim(r)

    async def start(self) -> None:
        """One pass now, then the loop (on the running loop: the gate's portal)."""
        self._wake = asyncio.Event()
        await self.sweep()
        self._task = asyncio.ensure_future(self._loop())

    async def _loop(self) -> None:
        assert self._wake is not None
        while True:
            # Clear before the pass: a poke during it (a request stored after the pass read
            # the next deadline) makes the wait below return at once.
            self._wake.clear()
            self._wake_at = None
            try:
                await self.sweep()
                nxt = await self.gate.store.next_due_at()
            except Exception as exc:
                self.pass_failing.failed(exc)
                nxt = None
            else:
                self.pass_failing.worked()
            delay = self.interval
            now = utcnow()
            if nxt is not None:
                delay = max(0.0, min(delay, (nxt - now).total_seconds()))
            self._wake_at = now + timedelta(seconds=delay)
            with suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=delay)

    def poke(self, due_at: datetime | None = None) -> None:
        """Look again now, unless the loop already looks by ``due_at`` (the new request's
        deadline): a request due after the next wake-up needs no extra pass."""
        wake = self._wake
        if wake is None:
            return
        wake_at = self._wake_at
        if due_at is not None and wake_at is not None and due_at >= wake_at:
            return
        self.gate._portal.loop.call_soon_threadsafe(wake.set)

    async def stop(self) -> None:
        await self.gate.inquiry_judges.stop()
        task = self._task
        if task is None:
            return
        # Python 3.11's wait_for swallows a cancel that races with the wake event
        # (a request submitted just before close): cancel until the task really ends.
        while not task.done():
            task.cancel()
            await asyncio.wait([task], timeout=0.1)
        with suppress(asyncio.CancelledError):
            await task
