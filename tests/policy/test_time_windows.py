"""Time windows on ``context.time``: hours (with wrap-around), weekdays, time zones."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from tests.policy.helpers import call, ctx, kind_of, one_rule

MATCH, NO_MATCH, ERROR = "deny", "allow", "error"


def at(year: int, month: int, day: int, hour: int, minute: int) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def in_window(when: Mapping[str, object], time: datetime) -> str:
    return kind_of(one_rule({"context.time": dict(when)}), call("t"), ctx(time=time))


def test_inside_hours_between() -> None:
    assert in_window({"hours_between": [9, 18]}, at(2026, 11, 20, 9, 0)) == MATCH


def test_end_hour_is_exclusive() -> None:
    assert in_window({"hours_between": [9, 18]}, at(2026, 11, 20, 18, 0)) == NO_MATCH


def test_hours_wrap_around_midnight() -> None:
    night = {"hours_between": [22, 6]}
    assert in_window(night, at(2026, 11, 20, 23, 30)) == MATCH
    assert in_window(night, at(2026, 11, 20, 5, 59)) == MATCH
    assert in_window(night, at(2026, 11, 20, 12, 0)) == NO_MATCH


def test_hours_as_hh_mm_strings() -> None:
    window = {"hours_between": ["09:30", "17:00"]}
    assert in_window(window, at(2026, 11, 20, 9, 29)) == NO_MATCH
    assert in_window(window, at(2026, 11, 20, 9, 30)) == MATCH


def test_tz_shifts_the_local_hour() -> None:
    # 07:30 UTC is 08:30 in Berlin (CET, UTC+1 in November).
    window = {"hours_between": [8, 17], "tz": "Europe/Berlin"}
    assert in_window(window, at(2026, 11, 20, 7, 30)) == MATCH
    assert in_window({"hours_between": [8, 17]}, at(2026, 11, 20, 7, 30)) == NO_MATCH


def test_tz_follows_daylight_saving() -> None:
    # 07:30 UTC in July is 09:30 in Berlin (CEST, UTC+2).
    window = {"hours_between": [9, 17], "tz": "Europe/Berlin"}
    assert in_window(window, at(2026, 7, 15, 7, 30)) == MATCH


def test_weekday_in() -> None:
    workdays = {"weekday_in": ["mon", "tue", "wed", "thu", "fri"]}
    assert in_window(workdays, at(2026, 11, 20, 10, 0)) == MATCH  # Friday
    assert in_window(workdays, at(2026, 11, 22, 10, 0)) == NO_MATCH  # Sunday


def test_weekday_uses_the_local_date() -> None:
    # Friday 23:30 UTC is already Saturday in Tokyo.
    window = {"weekday_in": ["fri"], "tz": "Asia/Tokyo"}
    assert in_window(window, at(2026, 11, 20, 23, 30)) == NO_MATCH


def test_hours_and_weekdays_together() -> None:
    office = {"hours_between": [9, 18], "weekday_in": ["mon", "fri"], "tz": "Europe/Berlin"}
    assert in_window(office, at(2026, 11, 20, 10, 0)) == MATCH
    assert in_window(office, at(2026, 11, 20, 20, 0)) == NO_MATCH


def test_naive_time_is_taken_as_utc() -> None:
    assert in_window({"hours_between": [9, 18]}, datetime(2026, 11, 20, 10, 0)) == MATCH


def test_non_time_value_is_an_error() -> None:
    policy = one_rule({"args.when": {"hours_between": [9, 18]}})
    assert kind_of(policy, call("t", when="10:00")) == ERROR


def test_time_window_combines_with_not_for_out_of_hours() -> None:
    policy = one_rule({"not": {"context.time": {"hours_between": [9, 18]}}})
    late = at(2026, 11, 20, 10, 0) + timedelta(hours=12)
    assert kind_of(policy, call("t"), ctx(time=late)) == MATCH
