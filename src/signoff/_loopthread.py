"""A private event loop on a daemon thread, shared by every layer (imports nothing of signoff).

Why: some resources are bound to the loop that created them (psycopg's async pool and LISTEN
connection), and sync callers need a loop to drive async code (the gate's and the remote
gate's sync wrappers, the sweeper). Callers on any other loop or thread hop to it with
``run_coroutine_threadsafe`` (~30-60 µs).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import weakref
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

_THREADS: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


def on_a_loop_thread() -> bool:
    """True on the thread of any :class:`LoopThread` — a loop that stops without cancelling
    its tasks, so work that must finish (a write) should not be left on it."""
    return threading.current_thread() in _THREADS


class LoopThread:
    """Starts lazily; ``call`` runs a coroutine on the loop and awaits it from any loop."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                # Not waiting for the thread to start: work submitted before run_forever()
                # begins is queued (call_soon_threadsafe), and a caller on another event
                # loop must not block on a thread start.
                loop = asyncio.new_event_loop()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name=self._name, daemon=True)
                _THREADS.add(self._thread)
                self._thread.start()
                self._loop = loop
            return self._loop

    @property
    def started(self) -> bool:
        return self._loop is not None

    def on_loop(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread

    async def call(self, coro: Coroutine[Any, Any, T], *, shield: bool = False) -> T:
        """Await ``coro`` on this loop (directly when already on it).

        ``shield``: a caller that gives up (a client hung up, a timeout) does not cancel the
        work — a write whose COMMIT may already be on its way finishes, and the store wakes
        its waiters for it, instead of leaving the outcome unknown to this process.
        """
        if self.on_loop():
            return await (asyncio.shield(coro) if shield else coro)
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        if not shield:
            return await asyncio.wrap_future(future)
        future.add_done_callback(_retrieve)
        return await asyncio.shield(asyncio.wrap_future(future))

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and block this (non-loop) thread until it finishes."""
        if self.on_loop():
            coro.close()
            raise RuntimeError("LoopThread.run called from the loop's own thread (would deadlock)")
        return self.submit(coro).result(timeout)

    def stop(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not threading.current_thread():
            thread.join(timeout=5)
            if not loop.is_running():
                loop.close()


def _retrieve(future: Future[Any]) -> None:
    """Mark the outcome of shielded work as seen (its caller may be gone)."""
    if not future.cancelled():
        future.exception()


class Suspended(RuntimeError):
    """A coroutine given to :func:`run_inline` waited on something (it needs a real loop)."""


def run_inline(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never waits, on this thread and without an event loop.

    For callers that know every await inside ``coro`` completes at once (an in-memory store
    behind a started gate): it spares the ~2 thread switches of a hop to the loop thread.
    It runs in a copy of the caller's context, as a task on the loop thread would. A bare
    ``yield`` (``asyncio.sleep(0)``) is stepped over; anything that really waits cannot
    finish here, so the coroutine is closed and :class:`Suspended` raised — the caller's
    work stops (fails closed) rather than running on a half-done store call. Refused on a
    thread whose event loop is running (a sync call made from async code): a future made
    there would never complete.
    """
    if asyncio._get_running_loop() is not None:
        coro.close()
        raise Suspended("run_inline called on a thread with a running event loop")
    context = contextvars.copy_context()
    try:
        while True:
            waited_on = context.run(coro.send, None)
            if waited_on is not None:
                coro.close()
                name = getattr(coro, "__qualname__", "a coroutine")
                raise Suspended(
                    f"{name} waited on {type(waited_on).__name__}: it cannot "
                    "run inline (without an event loop)"
                )
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
