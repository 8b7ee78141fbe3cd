"""Sliding-window counts of executed calls, for the policy's ``rate:`` condition.

Counts live in the gate's memory (a deque of timestamps per key, O(1) amortised) and are
seeded from the audit log when the gate starts, so a restart does not reset a limit. With
several processes on one store each process counts its own executions plus what it saw at
start; the server (one process per replica) is the place to enforce tight global limits.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from datetime import datetime, timedelta

from signoff.model import CallContext, Principal, utcnow
from signoff.policy import Policy
from signoff.store import AuditQuery, Store

BY_FIELDS = ("principal", "agent", "thread", "tool")


def key_for(by: str, ctx: CallContext) -> str:
    if by == "principal":
        return ctx.principal.id
    if by == "agent":
        return ctx.agent or ""
    if by == "thread":
        return ctx.thread
    return ""


class RateWindows:
    """Implements the policy's ``RateCounter`` protocol."""

    def __init__(self, max_window_s: float = 86400.0, max_keys: int = 10_000) -> None:
        self._events: dict[tuple[str, str, str], deque[float]] = {}
        self._lock = threading.Lock()
        self._max_window_s = max_window_s
        self._max_keys = max_keys
        self._limit = 4 * max_keys

    def record(self, tool: str, ctx: CallContext, at: datetime) -> None:
        ts = at.timestamp()
        cutoff = ts - self._max_window_s
        with self._lock:
            for by in BY_FIELDS:
                q = self._events.setdefault((tool, by, key_for(by, ctx)), deque())
                q.append(ts)
                while q and q[0] < cutoff:  # prune as we go: memory stays bounded
                    q.popleft()
            if len(self._events) > self._limit:
                self._drop_stale(cutoff)
                # Many live keys: scan again only after the map doubles (amortised O(1)).
                self._limit = max(4 * self._max_keys, 2 * len(self._events))

    def _drop_stale(self, cutoff: float) -> None:
        """Forget keys (threads, principals) with nothing inside the longest window."""
        for key in [k for k, q in self._events.items() if not q or q[-1] < cutoff]:
            del self._events[key]

    def seed(self, tool: str, by: str, key: str, at: datetime) -> None:
        with self._lock:
            q = self._events.setdefault((tool, by, key), deque())
            q.append(at.timestamp())

    def count(self, tool: str, by: str, key: str, window_s: float, now: datetime) -> int:
        horizon = now.timestamp() - window_s
        with self._lock:
            q = self._events.get((tool, by, key))
            if not q:
                return 0
            cutoff = now.timestamp() - self._max_window_s
            while q and q[0] < cutoff:
                q.popleft()
            n = 0
            for ts in reversed(q):
                if ts < horizon:
                    break
                n += 1
            return n


async def seed_from_audit(
    rates: RateWindows, store: Store, policy: Policy, tools: Iterable[str]
) -> None:
    """Replay recent executions from the audit so a restart does not reset rate limits."""
    names = set(tools) | {
        k for k in policy.tool_keys if "*" not in k and "?" not in k and "[" not in k
    }
    for tool in sorted(names):
        windows = policy.rate_windows(tool)
        if not windows:
            continue
        since = utcnow() - timedelta(seconds=max(window for _by, window in windows))
        after = 0
        while True:
            rows = await store.read_audit(
                AuditQuery(after_seq=after, tool=tool, since=since, limit=1000)
            )
            for row in rows:
                if row.event in ("allowed", "executed"):
                    ctx = CallContext(
                        principal=Principal(row.principal or ""),
                        thread=row.thread or "",
                        agent=row.agent,
                    )
                    rates.record(tool, ctx, row.at)
            if len(rows) < 1000:
                break
            after = rows[-1].seq
