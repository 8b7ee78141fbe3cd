"""Prometheus metrics (text exposition format 0.0.4), every name prefixed ``signoff_``.

Counted in this server process: decisions it recorded, notification failures of its
channels, the time from a request's creation to the decision that resolved it. The pending
and quarantined gauges are indexed ``COUNT``s in the store (no row is read or parsed), so
they are right across processes and replicas; they are cached for at most
:data:`COUNTS_TTL_S`, so any number of scrapers cost the store one query a second.
No dependency: the format is a few lines of text.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from signoff.model import ApprovalRequest
from signoff.store import RequestCounts, Store

if TYPE_CHECKING:
    from signoff.gate import Gate
    from signoff.gate.wiring import Notifier

TIME_TO_DECISION_BUCKETS = (
    1.0,
    5.0,
    15.0,
    30.0,
    60.0,
    300.0,
    900.0,
    1800.0,
    3600.0,
    4 * 3600.0,
    12 * 3600.0,
    86400.0,
)
COUNTS_TTL_S = 1.0


class CachedCounts:
    """The store's request counts, read at most once per ``ttl_s`` (concurrent scrapes share
    one query instead of each running it)."""

    def __init__(self, ttl_s: float = COUNTS_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._value: RequestCounts | None = None
        self._at = 0.0
        self._lock: asyncio.Lock | None = None
        self.queries = 0

    async def get(self, store: Store) -> RequestCounts:
        if self._value is not None and time.monotonic() - self._at < self.ttl_s:
            return self._value
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._value is None or time.monotonic() - self._at >= self.ttl_s:
                self._value = await store.count_requests()
                self._at = time.monotonic()
                self.queries += 1
            return self._value


class Metrics:
    def __init__(self) -> None:
        self.decisions: Counter[tuple[str, str]] = Counter()
        self.notification_failures: Counter[str] = Counter()
        self._buckets = [0] * len(TIME_TO_DECISION_BUCKETS)
        self._ttd_count = 0
        self._ttd_sum = 0.0
        self.long_polls = 0
        self.sse_clients = 0
        self.counts = CachedCounts()

    def decided(self, types_and_channels: Iterable[tuple[str, str]]) -> None:
        self.decisions.update(types_and_channels)

    def resolved(self, req: ApprovalRequest) -> None:
        if req.resolved_at is None:
            return
        seconds = max(0.0, (req.resolved_at - req.created_at).total_seconds())
        index = bisect.bisect_left(TIME_TO_DECISION_BUCKETS, seconds)
        if index < len(self._buckets):
            self._buckets[index] += 1
        self._ttd_count += 1
        self._ttd_sum += seconds

    def render(
        self,
        counts: RequestCounts,
        outbox_failures: Mapping[str, int] | None = None,
        intent_checks: Mapping[tuple[str, str], int] | None = None,
        intent_cache_hits: int = 0,
    ) -> str:
        lines = [
            "# HELP signoff_pending_requests Approval requests waiting for a decision.",
            "# TYPE signoff_pending_requests gauge",
            f"signoff_pending_requests {counts.pending}",
            "# HELP signoff_quarantined_requests Pending requests whose stored row cannot be "
            "read (see `signoff db check`).",
            "# TYPE signoff_quarantined_requests gauge",
            f"signoff_quarantined_requests {counts.quarantined}",
            "# HELP signoff_decisions_total Human decisions recorded by this server.",
            "# TYPE signoff_decisions_total counter",
        ]
        for (kind, channel), n in sorted(self.decisions.items()):
            lines.append(
                f'signoff_decisions_total{{type="{_esc(kind)}",channel="{_esc(channel)}"}} {n}'
            )
        lines += [
            "# HELP signoff_time_to_decision_seconds From request creation to the deciding "
            "decision.",
            "# TYPE signoff_time_to_decision_seconds histogram",
        ]
        running = 0
        for bound, n in zip(TIME_TO_DECISION_BUCKETS, self._buckets, strict=True):
            running += n
            lines.append(f'signoff_time_to_decision_seconds_bucket{{le="{bound:g}"}} {running}')
        lines += [
            f'signoff_time_to_decision_seconds_bucket{{le="+Inf"}} {self._ttd_count}',
            f"signoff_time_to_decision_seconds_sum {self._ttd_sum:.6f}",
            f"signoff_time_to_decision_seconds_count {self._ttd_count}",
            "# HELP signoff_notification_failures_total Notifications a channel failed to send.",
            "# TYPE signoff_notification_failures_total counter",
        ]
        failures = Counter(self.notification_failures)
        failures.update(outbox_failures or {})  # provider channels sent by the outbox worker
        for channel, n in sorted(failures.items()):
            lines.append(f'signoff_notification_failures_total{{channel="{_esc(channel)}"}} {n}')
        lines += [
            "# HELP signoff_long_polls Agents waiting in GET /v1/requests/{id}/wait right now.",
            "# TYPE signoff_long_polls gauge",
            f"signoff_long_polls {self.long_polls}",
            "# HELP signoff_event_streams Open GET /v1/events streams.",
            "# TYPE signoff_event_streams gauge",
            f"signoff_event_streams {self.sse_clients}",
            "# HELP signoff_intent_checks_total Intent judge answers, by judge and verdict.",
            "# TYPE signoff_intent_checks_total counter",
        ]
        for (judge, verdict), n in sorted((intent_checks or {}).items()):
            lines.append(
                f'signoff_intent_checks_total{{judge="{_esc(judge)}",verdict="{_esc(verdict)}"}}'
                f" {n}"
            )
        lines += [
            "# HELP signoff_intent_cache_hits_total Intent checks answered from the cache.",
            "# TYPE signoff_intent_cache_hits_total counter",
            f"signoff_intent_cache_hits_total {intent_cache_hits}",
        ]
        return "\n".join(lines) + "\n"


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class CountingChannel:
    """Wraps a gate's channel to count its failures; re-raises so the gate still audits."""

    def __init__(self, inner: Notifier, metrics: Metrics) -> None:
        self.inner = inner
        self.metrics = metrics
        self.name = inner.name

    async def notify(self, request: ApprovalRequest, gate: Gate) -> None:
        try:
            await self.inner.notify(request, gate)
        except Exception:
            self.metrics.notification_failures[self.name] += 1
            raise

    async def resolved(self, request: ApprovalRequest, gate: Gate) -> None:
        await self.inner.resolved(request, gate)


def count_channel_failures(gate: Gate, metrics: Metrics) -> None:
    gate.channels = [
        c if isinstance(c, CountingChannel) else CountingChannel(c, metrics) for c in gate.channels
    ]
