"""Who is waiting for which request, and who listens to changes — shared by every backend.

Waiters are asyncio futures bound to the loop that created them; a store wakes them from
whatever thread committed (its writer thread, a watcher thread, another loop) with
``loop.call_soon_threadsafe``, so one store serves any number of event loops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable

from signoff.model import ApprovalRequest, NotFound
from signoff.store.base import ChangeListener

log = logging.getLogger("signoff.store")

_Waiter = tuple[asyncio.AbstractEventLoop, "asyncio.Future[ApprovalRequest]"]


def _settle(fut: asyncio.Future[ApprovalRequest], value: ApprovalRequest | BaseException) -> None:
    if fut.done():
        return
    if isinstance(value, BaseException):
        fut.set_exception(value)
    else:
        fut.set_result(value)


def _settle_made(fut: asyncio.Future[ApprovalRequest], make: Callable[[], ApprovalRequest]) -> None:
    """On ``fut``'s loop: settle it with ``make()``, or with what ``make`` raised."""
    if fut.done():
        return
    try:
        value: ApprovalRequest | BaseException = make()
    except Exception as exc:  # the waiter learns why instead of waiting on
        value = exc
    _settle(fut, value)


settle_made = _settle_made


class Waiters:
    """Futures of tasks waiting for a request to become terminal."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[str, list[_Waiter]] = {}

    def add(self, request_id: str) -> asyncio.Future[ApprovalRequest]:
        """A new future for the running loop; register it *before* reading the row."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[ApprovalRequest] = loop.create_future()
        with self._lock:
            self._by_id.setdefault(request_id, []).append((loop, fut))
        return fut

    def remove(self, request_id: str, fut: asyncio.Future[ApprovalRequest]) -> None:
        with self._lock:
            waiters = self._by_id.get(request_id)
            if not waiters:
                return
            waiters[:] = [w for w in waiters if w[1] is not fut]
            if not waiters:
                del self._by_id[request_id]

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._by_id)

    def has(self, request_id: str) -> bool:
        return request_id in self._by_id

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_id)

    def wake(self, request: ApprovalRequest, *, shared: bool = False) -> int:
        """Hand each waiter its own copy of ``request`` (``shared``: ``request`` itself, a
        read-only snapshot, as the MemoryStore keeps them); returns how many were woken.

        Copies are made only for actual waiters (~28 µs each, model/_clone.py).
        """
        with self._lock:
            if request.id not in self._by_id:
                return 0
            waiters = self._by_id.pop(request.id)
        for loop, fut in waiters:
            self._call(loop, fut, request if shared else request.copy_for_update())
        return len(waiters)

    def wake_each(self, request_id: str, make: Callable[[], ApprovalRequest]) -> int:
        """Like :meth:`wake`, but each waiter's copy is made by ``make`` on the waiter's own
        loop (the SQLite writer hands over the document's text: no copying on its thread)."""
        with self._lock:
            if request_id not in self._by_id:
                return 0
            waiters = self._by_id.pop(request_id)
        for loop, fut in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                loop.call_soon_threadsafe(_settle_made, fut, make)
        return len(waiters)

    def take(self, request_id: str) -> list[_Waiter]:
        """Remove and return the waiters of ``request_id`` as ``(loop, future)``, for a caller
        that settles them itself (with :func:`settle_made`, on each waiter's loop)."""
        with self._lock:
            return self._by_id.pop(request_id, [])

    def fail(self, request_id: str, error: BaseException) -> int:
        """Raise ``error`` in every waiter of one request (its row became unreadable)."""
        with self._lock:
            waiters = self._by_id.pop(request_id, [])
        for loop, fut in waiters:
            self._call(loop, fut, error)
        return len(waiters)

    def fail_all(self, error: BaseException) -> None:
        with self._lock:
            everyone = [w for ws in self._by_id.values() for w in ws]
            self._by_id.clear()
        for loop, fut in everyone:
            self._call(loop, fut, error)

    @staticmethod
    def _call(
        loop: asyncio.AbstractEventLoop,
        fut: asyncio.Future[ApprovalRequest],
        value: ApprovalRequest | BaseException,
    ) -> None:
        if asyncio._get_running_loop() is loop:  # woken from its own loop (MemoryStore)
            # settled at once: the future schedules its task's wake-up itself (call_soon), so
            # nothing runs here and no turn of the loop passes first (no self-pipe write)
            _settle(fut, value)
            return
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_settle, fut, value)


class Listeners:
    """Change listeners; each is called after commit and must be cheap and never raise."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[ChangeListener] = []

    def add(self, listener: ChangeListener) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(listener)

        def remove() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return remove

    def __bool__(self) -> bool:
        return bool(self._listeners)

    def notify(self, request: ApprovalRequest, event: str) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(request, event)
            except Exception:  # a broken listener must not undo or delay a committed change
                log.exception(
                    "store change listener raised", extra={"request_id": request.id, "event": event}
                )


def listener_event(events: list[str], request: ApprovalRequest) -> str:
    """The event name listeners get for one committed transition: its last audit event."""
    if events:
        return events[-1]
    return "resolved" if request.terminal else "decided"


async def wait_until_terminal(
    waiters: Waiters,
    read: Callable[[str], Awaitable[ApprovalRequest | None]],
    request_id: str,
    timeout: float | None,
) -> ApprovalRequest:
    """The ``Store.wait`` algorithm: register, read, then sleep on the future (no polling).

    Registering before the first read closes the gap where a decision commits between the
    read and the registration and nobody would ever wake us.
    """
    fut = waiters.add(request_id)
    try:
        request = await read(request_id)
        if request is None:
            raise NotFound(f"no approval request {request_id}")
        if request.terminal:
            return request
        if timeout is None:
            return await fut
        # the future is ours alone: a timer settles it with TimeoutError (asyncio.wait_for
        # would wrap it in a second future and two callbacks, on every wait)
        timer = asyncio.get_running_loop().call_later(timeout, _time_out, fut)
        try:
            return await fut
        except TimeoutError:
            return await read(request_id) or request
        finally:
            timer.cancel()
    finally:
        waiters.remove(request_id, fut)


def _time_out(fut: asyncio.Future[ApprovalRequest]) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())
