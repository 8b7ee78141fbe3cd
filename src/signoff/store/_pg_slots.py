"""Connection slots shared by every event loop and thread that uses one PostgreSQL store.

The store runs a statement on its caller's event loop (no hop to another thread), so the pool
is borrowed from many loops at once, and an ``asyncio.Semaphore`` — bound to the first loop
that waits on it — cannot count its slots. :class:`Slots` counts under a ``threading.Lock``;
a caller that finds none free waits on a future of its own loop, and a release hands the slot
straight to the oldest waiter (``call_soon_threadsafe`` when it waits on another loop). A
waiter that times out or is cancelled after a slot was handed to it passes the slot on.

And :class:`InFlight`: writes under way on any loop, so closing the store can let them finish.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Any


class _Waiter:
    __slots__ = ("fut", "granted", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop, fut: asyncio.Future[None]) -> None:
        self.loop = loop
        self.fut = fut
        self.granted = False


def _grant(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class Slots:
    """Up to ``size`` holders at a time, across event loops and threads (first come, first
    served)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._free = size
        self._lock = threading.Lock()
        self._waiting: deque[_Waiter] = deque()

    @property
    def in_use(self) -> int:
        return self.size - self._free

    async def acquire(self, timeout: float) -> bool:
        """Take a slot; False if none came free within ``timeout`` seconds."""
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return True
            loop = asyncio.get_running_loop()
            waiter = _Waiter(loop, loop.create_future())
            self._waiting.append(waiter)
        try:
            await asyncio.wait_for(waiter.fut, timeout)
        except BaseException as exc:
            with self._lock:
                granted = waiter.granted
                if not granted:
                    self._waiting.remove(waiter)
            if granted:  # handed over as we gave up: it is ours, so pass it on
                self.release()
            if isinstance(exc, TimeoutError):
                return False
            raise
        return True

    def release(self) -> None:
        """Give a slot back: to the oldest waiter, or to the free count."""
        while True:
            with self._lock:
                if not self._waiting:
                    self._free += 1
                    return
                waiter = self._waiting.popleft()
                waiter.granted = True
            if asyncio._get_running_loop() is waiter.loop:
                _grant(waiter.fut)
                return
            try:
                waiter.loop.call_soon_threadsafe(_grant, waiter.fut)
                return
            except RuntimeError:  # that loop is closed: nobody waits there any more
                continue


class InFlight:
    """How many writes are under way (any loop); :meth:`wait_idle` blocks until none are."""

    def __init__(self) -> None:
        self._count = 0
        self._idle = threading.Condition()

    def __len__(self) -> int:
        return self._count

    def enter(self) -> None:
        with self._idle:
            self._count += 1

    def exit(self) -> None:
        with self._idle:
            self._count -= 1
            if not self._count:
                self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Block this thread (never an event loop's) until no write is under way."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._count, timeout)


def retrieve(task: asyncio.Future[Any]) -> None:
    """Mark the outcome of a shielded write as seen (its caller may have gone)."""
    if not task.cancelled():
        task.exception()
