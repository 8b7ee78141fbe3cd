"""What every flow of one :class:`SignoffMiddleware` needs, in one place."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Literal

from signoff._loopthread import run_inline
from signoff.gate import Gate
from signoff.integrations.langchain._effects import Io
from signoff.integrations.langchain._review import (
    PrincipalSetting,
    ReviewedCalls,
    StepReviewer,
)
from signoff.model import ApprovalRequest
from signoff.store import MemoryStore

WaitMode = Literal["interrupt", "blocking"]


@dataclass(slots=True)
class Settings:
    gate: Gate
    reviewer: StepReviewer
    mode: WaitMode = "interrupt"
    hold_ungated: bool = False
    approver: str | None = None
    principal: PrincipalSetting = None
    agent: str | None = None
    edit_notice: str | None = None
    memory: ReviewedCalls = field(default_factory=ReviewedCalls)
    #: (request id, call id) of approved calls whose tool paused the graph mid-run (a
    #: subagent asking for approval): their re-run on resume is the same execution.
    paused_runs: set[tuple[str, str]] = field(default_factory=set)
    snapshots: RecentRequests = field(default_factory=lambda: RecentRequests())

    #: Store calls whose result nobody waits for (an executed call's ``finish``), still
    #: committing on the gate's loop thread; settled by :meth:`flush`.
    unsettled: list[Future[Any]] = field(default_factory=list)

    def run_io(self, coro: Coroutine[Any, Any, Any], waits: bool = False) -> Any:
        """Run a gate coroutine from sync code: on this thread when nothing in it can wait
        (:func:`runs_inline`; ``waits``: it waits for a decision), else on the gate's own
        event loop thread. Store calls left unsettled are settled first, in order."""
        self.flush()
        # Not on a thread whose event loop is running (a sync invoke from a notebook cell):
        # run_inline refuses there, the loop thread does not mind.
        if not waits and runs_inline(self.gate) and asyncio._get_running_loop() is None:
            return run_inline(coro)
        return self.gate._portal.run(coro)

    def run_effect(self, io: Io) -> Any:
        """The sync driver's ``Io``: a ``later`` one on a store that commits on another
        thread is left committing (its outcome checked by the next :meth:`flush`)."""
        if io.later and not runs_inline(self.gate):
            self.flush()
            self.unsettled.append(self.gate._portal.submit(io.coro))
            return None
        return self.run_io(io.coro, io.waits)

    def flush(self) -> None:
        """Wait until every unsettled store call committed; raise the first one's error."""
        if not self.unsettled:
            return
        futures = list(self.unsettled)
        errors = [e for e in map(_outcome, futures) if e is not None]
        self._forget(futures)
        if errors:
            raise errors[0]

    async def aflush(self) -> None:
        """:meth:`flush` for async code (awaits, never blocks the event loop)."""
        if not self.unsettled:
            return
        futures = list(self.unsettled)
        errors: list[BaseException] = []
        for future in futures:
            try:
                await asyncio.wrap_future(future)
            except Exception as exc:
                errors.append(exc)
        self._forget(futures)
        if errors:
            raise errors[0]

    def _forget(self, futures: list[Future[Any]]) -> None:
        for future in futures:
            with suppress(ValueError):  # another thread's flush took it already
                self.unsettled.remove(future)


def _outcome(future: Future[Any]) -> BaseException | None:
    try:
        future.result()
    except Exception as exc:
        return exc
    return None


def runs_inline(gate: Gate) -> bool:
    """Whether the gate's coroutines complete without waiting, so sync code may run them on
    its own thread (:func:`signoff._loopthread.run_inline`) instead of hopping to the loop.

    True for a started gate on a plain :class:`MemoryStore` (every method one locked block)
    with no channels, outbox delivery or intent judges (those do real I/O). Anything else —
    a durable store, a subclass, the first call that starts the gate — takes the portal.
    """
    return (
        type(gate.store) is MemoryStore
        and gate.writable
        and not gate.channels
        and gate.delivery is None
        and not gate.intents.judges
    )


class RecentRequests:
    """Requests this process just stored, to spare a store read right after.

    A *pending* snapshot (just submitted) is handed out once and only while fresh: it
    builds the interrupt of the very next model pass. A *terminal* one (just decided) is
    final by definition and serves the tool calls that run next.
    """

    PENDING_FRESH_S = 1.0

    def __init__(self, limit: int = 1000) -> None:
        self._items: dict[str, tuple[float, ApprovalRequest]] = {}
        self._limit = limit

    def keep(self, req: ApprovalRequest) -> None:
        if len(self._items) >= self._limit:
            for key in list(self._items)[: self._limit // 10 or 1]:
                self._items.pop(key, None)
        self._items[req.id] = (time.monotonic(), req)

    def just_submitted(self, request_id: str) -> ApprovalRequest | None:
        found = self._items.pop(request_id, None)
        if found is None or not found[1].pending:
            return None
        at, req = found
        return req if time.monotonic() - at <= self.PENDING_FRESH_S else None

    def decided(self, request_id: str) -> ApprovalRequest | None:
        found = self._items.get(request_id)
        return found[1] if found is not None and found[1].terminal else None
