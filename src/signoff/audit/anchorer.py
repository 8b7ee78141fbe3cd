"""The checkpoint writer: signs the audit log's head and sends it to the sink.

It runs in the process holding ``audit.key``: every ``signoff serve`` replica (started and
stopped with the app), or ``signoff audit anchor`` as a sidecar. It looks at the head of the
log every :data:`CHECK_S` seconds (one indexed read) and writes a checkpoint when
``anchor_every`` rows were added since its last one, or ``anchor_interval`` passed and
anything was added; and one more when it stops. A failed write is logged and retried at the
next look — a checkpoint never blocks or fails a tool call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from signoff.audit.checkpoints import Checkpoint, sign
from signoff.audit.settings import AuditSettings
from signoff.audit.sinks import AnchorError, Sink, open_sink
from signoff.model import SignoffError
from signoff.policy import Policy
from signoff.store import Store

log = logging.getLogger("signoff.audit")
CHECK_S = 0.5


class Anchorer:
    """Writes signed checkpoints of ``store``'s audit log to ``sink``."""

    def __init__(
        self,
        store: Store,
        sink: Sink,
        key: bytes,
        *,
        signer: str,
        every: int = 100,
        interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.sink = sink
        self.signer = signer
        self.every = every
        self.interval = interval
        self._key = key
        self.last: tuple[int, str] | None = None  # the head of the last checkpoint written
        self.written = 0
        self._clock = clock
        self._last_at = clock()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_settings(
        cls, store: Store, settings: AuditSettings, base_dir: Path | None = None
    ) -> Anchorer | None:
        """The anchorer ``audit:`` asks for; None without ``audit.anchor``."""
        target = settings.target(base_dir)
        key = settings.key_bytes
        if target is None or key is None:
            return None
        return cls(
            store,
            open_sink(target),
            key,
            signer=settings.signer_name(),
            every=settings.anchor_every,
            interval=settings.anchor_interval,
        )

    @classmethod
    def from_policy(cls, store: Store, policy: Policy) -> Anchorer | None:
        base_dir = policy.path.resolve().parent if policy.path else None
        return cls.from_settings(store, AuditSettings.from_policy(policy), base_dir)

    async def anchor(self) -> Checkpoint | None:
        """Checkpoint the head now unless it is empty or already checkpointed by us."""
        head = await self.store.audit_head()
        if head[0] == 0 or head == self.last:
            await self.sink.retry()
            return None
        checkpoint = sign(self._key, head[0], head[1], self.signer)
        await self.sink.write(checkpoint)
        self.last, self._last_at = head, self._clock()
        self.written += 1
        return checkpoint

    async def step(self) -> Checkpoint | None:
        """One look at the head: checkpoint it if ``every`` rows or ``interval`` s are due."""
        head = await self.store.audit_head()
        last_seq = self.last[0] if self.last else 0
        if head[0] == 0 or (self.last is not None and head == self.last):
            await self.sink.retry()
            return None
        due_by_count = head[0] - last_seq >= self.every
        due_by_time = self._clock() - self._last_at >= self.interval
        if self.last is None or due_by_count or due_by_time:
            return await self.anchor()
        await self.sink.retry()
        return None

    async def run(self) -> None:
        """Look at the head until :meth:`stop`; errors are logged, never raised."""
        tick = min(CHECK_S, self.interval)
        while not self._stop.is_set():
            await self._safely(self.step)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), tick)

    def request_stop(self) -> None:
        """Make :meth:`run` return after its current look (safe from a signal handler)."""
        self._stop.set()

    def start(self) -> asyncio.Task[None]:
        """Run in a task of the current loop."""
        self._task = asyncio.create_task(self.run(), name="signoff-audit-anchor")
        return self._task

    async def stop(self) -> Checkpoint | None:
        """Stop looking, write the final checkpoint (after queued audit events), close."""
        self._stop.set()
        if self._task is not None:
            await self._task
            self._task = None
        try:
            await self.store.flush_audit()
        except SignoffError as exc:
            log.warning("queued audit events not flushed before the last checkpoint: %s", exc)
        final = await self._safely(self.anchor)
        await self.sink.close()
        return final

    async def _safely(self, job: Callable[[], Awaitable[Checkpoint | None]]) -> Checkpoint | None:
        try:
            return await job()
        except (AnchorError, SignoffError, OSError) as exc:
            log.error(
                "audit checkpoint not written: %s",
                exc,
                extra={"anchor": self.sink.name, "signer": self.signer},
            )
            return None
