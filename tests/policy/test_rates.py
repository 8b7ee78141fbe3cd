"""``rate:`` conditions and the counter the gate passes in."""

from __future__ import annotations

from datetime import datetime

from signoff.policy import Policy, RateCounter
from tests.policy.helpers import FRIDAY_10_UTC, call, ctx, load

LIMITED = """
tools:
  send_email:
    default: allow
    rules:
      - id: too-many
        when: {rate: {max: 5, per: 1h, by: principal}}
        decision: require_approval
        approvers: {roles: [ops]}
  "export_*":
    default: allow
    rules:
      - id: export-burst
        when: {rate: {max: 2, per: 10m, by: agent}}
        decision: deny
        reason: too many exports
"""


class FakeCounter:
    def __init__(self, count: int) -> None:
        self.result = count
        self.asked: list[tuple[str, str, str, float, datetime]] = []

    def count(self, tool: str, by: str, key: str, window_s: float, now: datetime) -> int:
        self.asked.append((tool, by, key, window_s, now))
        return self.result


class BrokenCounter:
    def count(self, tool: str, by: str, key: str, window_s: float, now: datetime) -> int:
        raise ConnectionError("audit store unreachable")


def policy() -> Policy:
    return load(LIMITED)


def test_under_the_limit_does_not_match() -> None:
    verdict = policy().evaluate(call("send_email"), ctx(), rates=FakeCounter(4))
    assert (verdict.kind, verdict.rule) == ("allow", "send_email.default")


def test_at_the_limit_matches() -> None:
    verdict = policy().evaluate(call("send_email"), ctx(), rates=FakeCounter(5))
    assert (verdict.kind, verdict.rule) == ("require_approval", "too-many")


def test_counter_is_asked_with_tool_key_window_and_call_time() -> None:
    counter = FakeCounter(0)
    policy().evaluate(call("send_email"), ctx("erin"), rates=counter)
    assert counter.asked == [("send_email", "principal", "erin", 3600.0, FRIDAY_10_UTC)]


def test_glob_entry_counts_the_actual_tool_by_agent() -> None:
    counter = FakeCounter(2)
    verdict = policy().evaluate(call("export_csv"), ctx(agent="bot"), rates=counter)
    assert verdict.rule == "export-burst"
    assert counter.asked[0][:4] == ("export_csv", "agent", "bot", 600.0)


def test_rate_by_agent_without_an_agent_fails_closed() -> None:
    verdict = policy().evaluate(call("export_csv"), ctx(), rates=FakeCounter(0))
    assert verdict.rule == "defaults.on_error"


def test_no_counter_fails_closed() -> None:
    verdict = policy().evaluate(call("send_email"), ctx())
    assert (verdict.kind, verdict.rule) == ("require_approval", "defaults.on_error")
    assert verdict.reason is not None and "rate counter" in verdict.reason


def test_raising_counter_fails_closed() -> None:
    verdict = policy().evaluate(call("send_email"), ctx(), rates=BrokenCounter())
    assert verdict.rule == "defaults.on_error"
    assert verdict.reason is not None and "ConnectionError: audit store unreachable" in (
        verdict.reason
    )


def test_rate_windows_name_what_the_gate_must_count() -> None:
    p = policy()
    assert p.rate_windows("send_email") == [("principal", 3600.0)]
    assert p.rate_windows("export_pdf") == [("agent", 600.0)]
    assert p.rate_windows("unknown") == []


def test_fake_counter_satisfies_the_protocol() -> None:
    assert isinstance(FakeCounter(0), RateCounter)


def test_summary_lists_rate_limited_tools() -> None:
    assert policy().summary()["rate_limited_tools"] == ["send_email", "export_*"]
