"""Rate conditions: ``rate: {max: 5, per: 1h, by: principal}`` and the counter they ask.

The policy does not count anything itself: counting needs the executed-call history, which
the gate owns. The gate passes a :class:`RateCounter` to ``Policy.evaluate``; without one a
rate condition is an evaluation error, so the call goes to ``on_error`` (fail closed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Literal, Protocol, get_args, runtime_checkable

from signoff.model import CallContext, PolicyError, ToolCall
from signoff.policy.durations import parse_duration
from signoff.policy.fields import EvalError, Missing
from signoff.policy.source import LoadError, Loc

RateBy = Literal["principal", "agent", "thread", "tool"]
RATE_BY: tuple[RateBy, ...] = get_args(RateBy)
RATE_KEYS = ("max", "per", "by")


@runtime_checkable
class RateCounter(Protocol):
    """Counts executed calls of ``tool`` in the ``window_s`` seconds before ``now``.

    ``by`` says what ``key`` is: a principal id, an agent name, a thread id, or the tool name
    itself. The gate keeps these counts per process from executed calls (seeded from the
    audit on start) and only for the windows ``Policy.rate_windows(tool)`` names.
    """

    def count(self, tool: str, by: str, key: str, window_s: float, now: datetime) -> int: ...


RateCond = Callable[[ToolCall, CallContext, RateCounter | None], bool]


def compile_rate(data: object, loc: Loc) -> tuple[RateCond, RateBy, float]:
    """The condition plus its ``(by, window_s)``; raises LoadError on a malformed spec."""
    if not isinstance(data, Mapping):
        raise LoadError(loc, "rate is a mapping like {max: 5, per: 1h, by: principal}")
    unknown = sorted(str(k) for k in data if k not in RATE_KEYS)
    if unknown:
        raise LoadError(loc, f"unknown key(s) {unknown}; allowed: {list(RATE_KEYS)}")
    limit = data.get("max")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise LoadError(loc.key("max"), f"rate.max needs an integer >= 1, got {limit!r}")
    if "per" not in data:
        raise LoadError(loc, "rate needs `per`, the window, like per: 1h")
    try:
        window = parse_duration(data["per"])
    except PolicyError as exc:
        raise LoadError(loc.key("per"), exc.message) from None
    by = data.get("by", "principal")
    if by not in RATE_BY:
        raise LoadError(loc.key("by"), f"rate.by must be one of {list(RATE_BY)}, got {by!r}")
    return _rate_condition(limit, window, by), by, window


def _rate_condition(limit: int, window: float, by: RateBy) -> RateCond:
    key_of = _KEYS[by]

    def over_rate(call: ToolCall, ctx: CallContext, rates: RateCounter | None) -> bool:
        if rates is None:
            raise EvalError("a rate condition needs a rate counter and none was given")
        now = ctx.field("time")  # the call's time (now, when the context leaves it unset)
        count = rates.count(call.name, by, key_of(call, ctx), window, now)
        if isinstance(count, bool) or not isinstance(count, int):
            raise EvalError(f"the rate counter returned {type(count).__name__}, not an int")
        return count >= limit

    return over_rate


def _by_principal(call: ToolCall, ctx: CallContext) -> str:
    return ctx.principal.id


def _by_agent(call: ToolCall, ctx: CallContext) -> str:
    if ctx.agent is None:
        raise Missing("context.agent", " (rate by agent)")
    return ctx.agent


def _by_thread(call: ToolCall, ctx: CallContext) -> str:
    return ctx.thread


def _by_tool(call: ToolCall, ctx: CallContext) -> str:
    return call.name


_KEYS: dict[str, Callable[[ToolCall, CallContext], str]] = {
    "principal": _by_principal,
    "agent": _by_agent,
    "thread": _by_thread,
    "tool": _by_tool,
}
