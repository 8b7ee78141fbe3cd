"""Durations in the policy file: seconds, or ``30s``, ``15m``, ``4h``, ``1d`` (and ``1h30m``)."""

from __future__ import annotations

import math
import re

from signoff.model import PolicyError

_UNIT_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = r"(\d+(?:\.\d+)?)([smhd])"
_WHOLE = re.compile(rf"^(?:{_PART})+$")
_PARTS = re.compile(_PART)
_NUMBER = re.compile(r"^\d+(?:\.\d+)?$")

HINT = "a duration is seconds or like 30s, 15m, 4h, 1d"


def parse_duration(value: object, path: str = "", *, line: int | None = None) -> float:
    """Seconds as a float > 0; raises PolicyError naming ``path`` otherwise.

    Accepts a positive number (seconds), a string of digits (seconds), or unit parts such as
    ``30s``, ``15m``, ``4h``, ``1d`` and combinations like ``1h30m``. Prose such as
    ``15 minutes`` is refused rather than guessed at, because a wrong deadline is silent.
    """
    seconds = _seconds(value)
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        shown = value if isinstance(value, str) else repr(value)
        raise PolicyError(f"{HINT}; got '{shown}'", path=path, line=line)
    return seconds


def _seconds(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if _NUMBER.match(text):
        return float(text)
    if not _WHOLE.match(text):
        return None
    return sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _PARTS.findall(text))


def format_duration(seconds: float) -> str:
    """The shortest exact unit form (``4h``, ``90s``) for messages and ``explain``."""
    for unit in ("d", "h", "m"):
        size = _UNIT_SECONDS[unit]
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
