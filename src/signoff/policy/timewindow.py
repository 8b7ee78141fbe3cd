"""Time windows on a datetime field: ``{hours_between: [9, 18], weekday_in: [mon, fri], tz: X}``.

The three keys form one check because they share one conversion to local time. Hours are
``[start, end)``; ``[22, 6]`` wraps around midnight. A naive datetime is taken as UTC.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from signoff.model import CallContext, ToolCall
from signoff.policy.fields import EvalError, kind
from signoff.policy.source import LoadError, Loc

TIME_KEYS = ("hours_between", "weekday_in", "tz")
_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_FULL_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

Check = Callable[[Any, ToolCall, CallContext], bool]


def compile_time_window(field: str, ops: Mapping[str, Any], loc: Loc) -> Check:
    """One check for the time keys present in ``ops``; raises LoadError."""
    if "hours_between" not in ops and "weekday_in" not in ops:
        raise LoadError(loc.key("tz"), "tz only applies with hours_between or weekday_in")
    zone = _zone(ops.get("tz", "UTC"), loc.key("tz"))
    minutes = (
        _hours(ops["hours_between"], loc.key("hours_between")) if "hours_between" in ops else None
    )
    days = _days(ops["weekday_in"], loc.key("weekday_in")) if "weekday_in" in ops else None

    def in_window(value: Any, call: ToolCall, ctx: CallContext) -> bool:
        if not isinstance(value, datetime):
            raise EvalError(f"type mismatch: {field} is {kind(value)}, a time window needs a time")
        local = (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(zone)
        if days is not None and local.weekday() not in days:
            return False
        if minutes is None:
            return True
        start, end = minutes
        now = local.hour * 60 + local.minute
        return start <= now < end if start < end else now >= start or now < end

    return in_window


def _zone(name: object, loc: Loc) -> tzinfo:
    if not isinstance(name, str):
        raise LoadError(loc, f"tz is a time zone name like Europe/Berlin, got {name!r}")
    if name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise LoadError(
            loc, f"unknown time zone {name!r}; use an IANA name like Europe/Berlin or UTC"
        ) from None


def _hours(value: object, loc: Loc) -> tuple[int, int]:
    hint = "hours_between is [start, end) local hours, like [9, 18], [22, 6] or ['09:30', '18:00']"
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise LoadError(loc, f"{hint}; got {value!r}")
    start, end = (_minute_of_day(v, hint, loc) for v in value)
    if start == end:
        raise LoadError(loc, f"{hint}; start and end are equal, so the window is empty")
    return start, end


def _minute_of_day(value: object, hint: str, loc: Loc) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 24:
        return value * 60
    if isinstance(value, str):
        hh, sep, mm = value.partition(":")
        if sep and hh.isdigit() and mm.isdigit() and len(mm) == 2:
            minutes = int(hh) * 60 + int(mm)
            if 0 <= int(hh) <= 24 and int(mm) < 60 and minutes <= 24 * 60:
                return minutes
    raise LoadError(loc, f"{hint}; {value!r} is not an hour 0-24 or 'HH:MM'")


def _days(value: object, loc: Loc) -> frozenset[int]:
    hint = f"weekday_in is a list of days from {list(_DAYS)}"
    if not isinstance(value, list | tuple) or not value:
        raise LoadError(loc, f"{hint}; got {value!r}")
    out: set[int] = set()
    for day in value:
        name = day.lower() if isinstance(day, str) else None
        if name in _DAYS:
            out.add(_DAYS.index(name))
        elif name in _FULL_DAYS:
            out.add(_FULL_DAYS.index(name))
        else:
            raise LoadError(loc, f"{hint}; {day!r} is not a day")
    return frozenset(out)
