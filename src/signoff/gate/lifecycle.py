"""Starting and stopping a gate: open the store, seed rate counts, run the sweeper and the
notification worker on the gate's own loop thread; flush and close in the reverse order.

A mixin of :class:`~signoff.gate.core.Gate`, kept apart so the facade reads as the API.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Self

from signoff.gate.grants import GrantCache
from signoff.gate.portal import Portal
from signoff.gate.ratelimit import RateWindows, seed_from_audit
from signoff.gate.sweeper import Sweeper
from signoff.gate.wiring import DeliveryWorker
from signoff.judges.runner import IntentChecker
from signoff.model import SignoffError
from signoff.policy import Policy
from signoff.policy.redact import Redaction
from signoff.store import Store


class Lifecycle:
    """start/astart, close/aclose, and the context-manager forms of both."""

    policy: Policy
    store: Store
    rates: RateWindows
    tools: dict[str, Any]
    sweeper: Sweeper
    grant_cache: GrantCache
    delivery: DeliveryWorker | None
    _portal: Portal
    _start_lock: threading.Lock
    _started: bool
    _closed: bool
    _deliverer: asyncio.Future[None] | None
    _writable: bool
    redaction: Redaction
    intents: IntentChecker

    @property
    def writable(self) -> bool:
        """Whether the store already proved it takes writes (after :meth:`ensure_writable`)."""
        return self._writable

    def _ensure_writable(self) -> None:
        """Sync form of :meth:`ensure_writable` (the first check of a gate). On the gate's own
        loop thread it is left to the async path, which every submission takes."""
        if not self._portal.on_loop():
            self._portal.run(self.ensure_writable())

    async def ensure_writable(self) -> None:
        """Start the gate and prove once that its store takes writes: a read-only or full
        store fails the first guarded call with a :class:`StoreError` naming the fix, instead
        of allowed calls running while their audit rows are lost."""
        if self._writable:
            return
        await self.astart()
        await self._on_portal(self.store.check_writable())
        self._writable = True

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
        self.redaction.use_store_salt(await self.store.redaction_salt())
        await seed_from_audit(self.rates, self.store, self.policy, self.tools)
        await self.grant_cache.load(self.store)
        self.grant_cache.start(self.store)
        await self.sweeper.start()  # expires what passed its deadline while nobody ran
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
        await self.sweeper.stop()
        await self.grant_cache.stop()
        await self.intents.aclose()
        if self.delivery is not None and self._deliverer is not None:
            await self.delivery.stop(self._deliverer)
        await self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        await self.astart()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def sweep(self) -> int:
        """Expire or escalate every due request once; returns how many changed."""
        return await self.sweeper.sweep()
