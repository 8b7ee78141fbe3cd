"""Rate windows: counts per key within a window, and memory that stays bounded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from signoff.gate.ratelimit import RateWindows
from signoff.model import CallContext, Principal

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def ctx(who: str, thread: str = "t") -> CallContext:
    return CallContext(principal=Principal(who), thread=thread)


def test_counts_only_calls_inside_the_window() -> None:
    rates = RateWindows()
    for minutes in (0, 10, 50):
        rates.record("send", ctx("erin"), T0 + timedelta(minutes=minutes))
    now = T0 + timedelta(minutes=65)
    assert rates.count("send", "principal", "erin", 3600, now) == 2
    assert rates.count("send", "principal", "bob", 3600, now) == 0
    assert rates.count("send", "tool", "", 3600, now) == 2


def test_keys_with_nothing_inside_the_longest_window_are_forgotten() -> None:
    rates = RateWindows(max_window_s=60, max_keys=10)
    for i in range(200):  # 200 threads, each used once, long ago
        rates.record("send", ctx("erin", thread=f"t{i}"), T0)
    for i in range(300):  # then 300 new threads, an hour later
        rates.record("send", ctx("erin", thread=f"new{i}"), T0 + timedelta(hours=1))
    assert ("send", "thread", "t0") not in rates._events
    assert len(rates._events) < 200 + 300
