"""Group commit for ``audit_nowait`` (the allowed/denied hot path) on the PostgreSQL store.

Any thread appends to a deque (atomic in CPython, no lock) and, only when the queue was idle,
pokes the store's loop. A task there commits everything queued, in order, at most
``interval_s`` after the first event, at once when ``batch_max`` are queued, on ``flush`` and
at close. A failed write (database down) keeps the events, in order, and retries with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from signoff.model import AuditEvent

log = logging.getLogger("signoff.store")

Writer = Callable[[list[AuditEvent]], Awaitable[None]]


class AuditBatcher:
    def __init__(self, write: Writer, *, interval_s: float = 0.1, batch_max: int = 1000) -> None:
        self._write = write
        self._interval = interval_s
        self._batch_max = batch_max
        self._queue: deque[AuditEvent] = deque()
        self._armed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kick: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._task: asyncio.Task[None] | None = None
        self.batches = 0
        self.batched_events = 0
        self.error: str | None = None  # why the last batch failed; None once one succeeds

    def __len__(self) -> int:
        return len(self._queue)

    def put(self, event: AuditEvent) -> None:
        """Queue ``event`` (any thread)."""
        self._queue.append(event)
        if not self._armed or len(self._queue) == self._batch_max:
            self._armed = True
            loop, kick = self._loop, self._kick
            if loop is not None and kick is not None:
                with contextlib.suppress(RuntimeError):  # loop closing: close() flushes
                    loop.call_soon_threadsafe(kick.set)

    def start(self) -> None:
        """Start the committing task on the running (store) loop."""
        self._loop = asyncio.get_running_loop()
        self._kick = asyncio.Event()
        self._lock = asyncio.Lock()
        self._task = asyncio.create_task(self._run())
        if self._queue:
            self._kick.set()

    async def flush(self) -> None:
        """Commit every event queued before this call (on the store loop); raises on failure.

        Shielded: a caller giving up (or ``stop``) must not cut a write whose COMMIT may
        already have happened — re-queueing that batch would write it twice.
        """
        await asyncio.shield(asyncio.ensure_future(self._flush_locked()))

    async def _flush_locked(self) -> None:
        assert self._lock is not None
        async with self._lock:
            self._armed = False  # disarm first: an event appended after this re-arms
            batch = []
            while self._queue:
                batch.append(self._queue.popleft())
            if not batch:
                return
            try:
                await self._write(batch)
            except BaseException:
                # Not written, or (connection lost mid-COMMIT) unknown: retrying may record an
                # event twice, which beats losing it.
                self._queue.extendleft(reversed(batch))
                raise
            self.error = None
            self.batches += 1
            self.batched_events += len(batch)

    async def stop(self) -> None:
        if self._task is not None:
            assert self._lock is not None
            async with self._lock:  # let a write in progress finish first
                self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        assert self._kick is not None
        delay = self._interval
        while True:
            await self._kick.wait()
            self._kick.clear()
            if len(self._queue) < self._batch_max:
                await asyncio.sleep(self._interval)
            try:
                await self.flush()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.error = f"{type(exc).__name__}: {exc}"
                log.exception(
                    "audit batch could not be written; will retry",
                    extra={"events": len(self._queue), "retry_in_s": delay},
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                self._kick.set()
            else:
                delay = self._interval
