"""Fan-out of request changes to Server-Sent Event streams (the live inbox, ``/v1/events``).

The store calls our listener after each commit, from whichever thread committed (its
writer, or its watcher for other processes' commits); we hop onto the server's loop with
``call_soon_threadsafe`` and put a small event on the queue of every subscriber allowed to
see the request. A subscriber too slow to keep up is dropped (its browser reconnects and
re-reads) rather than letting the queue grow without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from signoff.model import ApprovalRequest
from signoff.store import Store

#: Store listener events (the last audit event of a committed change of a request) → the
#: event types the API publishes. ``grant_revoked`` and ``grant_expired`` change no request,
#: so no stream hears of them; the Grants page and ``GET /v1/grants`` show the current state.
EVENT_TYPES = {
    "created": "created",
    "decided": "decided",
    "auto_approved": "decided",
    "resolved": "decided",
    "escalated": "escalated",
    "edit_rerouted": "decided",
    "stage_started": "decided",  # an approve completed a stage of a chain
    "grant_created": "decided",  # the last event of an approve that also granted
    "reconciled": "decided",  # a person recorded how an interrupted call ended
    "reattached": "decided",  # a restarted agent took the request up again
    "expired": "expired",
    "cancelled": "cancelled",
}
QUEUE_LIMIT = 1000

Filter = Callable[[ApprovalRequest], bool]


def event_data(req: ApprovalRequest, kind: str) -> dict[str, Any]:
    by = None
    if kind == "decided" and req.decisions:
        by = req.decisions[-1].approver
    elif kind == "cancelled":
        by = next((c.resolved_by for c in req.calls if c.resolved_by), None)
    at = req.resolved_at or (req.decisions[-1].at if req.decisions else req.created_at)
    return {
        "type": kind,
        "id": req.id,
        "kind": req.kind,
        "status": req.status,
        "thread": req.thread,
        "agent": req.agent,
        "tools": [a.name for a in req.action_requests],
        "by": by,
        "at": at.isoformat(),
    }


@dataclass(eq=False)
class Subscription:
    accepts: Filter
    queue: asyncio.Queue[tuple[int, dict[str, Any]] | None] = field(
        default_factory=lambda: asyncio.Queue(QUEUE_LIMIT)
    )


class EventHub:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._subs: set[Subscription] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._remove: Callable[[], None] | None = None
        self._seq = itertools.count(1)
        self.closed = False

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._remove = self.store.add_listener(self._on_change)

    def close(self) -> None:
        """End every stream (at shutdown, so uvicorn is not kept waiting on them)."""
        self.closed = True
        if self._remove is not None:
            self._remove()
            self._remove = None
        for sub in list(self._subs):
            self._drop(sub)

    @property
    def subscribers(self) -> int:
        return len(self._subs)

    def _on_change(self, req: ApprovalRequest, event: str) -> None:
        kind = EVENT_TYPES.get(event)
        loop = self._loop
        if kind is None or loop is None or not self._subs:
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens
            loop.call_soon_threadsafe(self._dispatch, req, kind)

    def _dispatch(self, req: ApprovalRequest, kind: str) -> None:
        data: dict[str, Any] | None = None
        for sub in list(self._subs):
            try:
                wanted = sub.accepts(req)
            except Exception:
                wanted = False
            if not wanted:
                continue
            data = data or event_data(req, kind)
            try:
                sub.queue.put_nowait((next(self._seq), data))
            except asyncio.QueueFull:
                self._drop(sub)

    def _drop(self, sub: Subscription) -> None:
        self._subs.discard(sub)
        while True:
            try:
                sub.queue.put_nowait(None)
                return
            except asyncio.QueueFull:
                sub.queue.get_nowait()

    async def stream(self, accepts: Filter) -> AsyncIterator[tuple[int, dict[str, Any]]]:
        """Events for one subscriber until it disconnects or the server stops."""
        sub = Subscription(accepts)
        if self.closed:
            return
        self._subs.add(sub)
        try:
            while True:
                item = await sub.queue.get()
                if item is None:
                    return
                yield item
        finally:
            self._subs.discard(sub)
