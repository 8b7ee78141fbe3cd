"""What an agent asks to do: a tool call, and the context it is made in."""

from __future__ import annotations

import base64
import os
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

ANONYMOUS = "anonymous"


def new_id(prefix: str) -> str:
    """A URL-safe identifier such as ``req_P7SsnUMX3fZ...``: the creation time (unix
    milliseconds, 7 characters of an order-keeping base64: 42 bits, until the year 2109),
    then 96 random bits.

    Ids sort by the millisecond they were made in, and so do the keys a store indexes by
    them: a new request's rows go next to the last ones in every index on its id (the SQLite
    file's id and audit indexes, PostgreSQL's b-trees), not to random pages of them. With
    random ids each write dirtied pages of its own in those indexes; time-ordered ids cut the
    pages an approval cycle writes to SQLite's WAL by about a quarter (docs/benchmarks.md,
    round 7; ordered only by the second, the audit index still took random pages). The
    random part keeps ids unguessable, as before; 27 characters for ``req_`` still fit a
    Telegram button with any choice index (channels/telegram.py).
    """
    global _last_stamp
    ms = _time_ns() // 1_000_000
    last = _last_stamp  # (one read: another thread may replace it meanwhile)
    if last[0] == ms:  # made this millisecond already (every id of a busy gate)
        stamp = last[1]
    else:
        # 48 bits in 8 characters, the first of them "-" (0) until 2109: left out
        stamp = _b64(ms.to_bytes(6, "big")).translate(_ORDERED)[1:].decode("ascii")
        _last_stamp = (ms, stamp)
    try:
        tail = _random_parts.popleft()
    except IndexError:
        tail = _refill()
    return f"{prefix}_{stamp}{tail}"


# The 96 random bits of an id: 16 characters of URL-safe base64, as secrets.token_urlsafe(12)
# gives them, cut from one os.urandom read per 256 ids. os.urandom lets go of the GIL for its
# system call, and on a busy gate each such release hands the GIL to another thread — the
# store's writer, an audit batch — and waits to get it back: one read per id cost a guarded
# call more in that wait than the read itself (docs/benchmarks.md, round 9). The parts are
# handed out once each (deque.popleft is atomic; a thread refilling keeps its first part for
# itself), and a forked child starts with none: it never repeats its parent's ids.
_RANDOM_BLOCK = 256
_random_parts: deque[str] = deque()


def _refill() -> str:
    text = _b64(os.urandom(12 * _RANDOM_BLOCK)).decode("ascii")  # 12 bytes: 16 characters
    parts = [text[i : i + 16] for i in range(0, 16 * _RANDOM_BLOCK, 16)]
    first = parts.pop()
    _random_parts.extend(parts)
    return first


os.register_at_fork(after_in_child=_random_parts.clear)


_time_ns = time.time_ns
# The last millisecond an id was made in and its 7 characters, replaced as one tuple
_last_stamp: tuple[int, str] = (-1, "")
_b64 = base64.urlsafe_b64encode
# URL-safe base64's 64 characters, digit for digit, in ASCII order: encoded text sorts as
# the numbers do
_ORDERED = bytes.maketrans(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
    b"-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz",
)


#: The current time, timezone-aware UTC: ``datetime.now(UTC)`` as a partial, called without
#: a Python frame of its own (several times on every approval cycle).
utcnow: Callable[[], datetime] = partial(datetime.now, UTC)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call an agent wants to make.

    ``id`` is the framework's tool-call id when it has one; signoff generates one otherwise.
    A call is identified by ``(thread, id)``: that pair is the idempotency key.
    """

    name: str
    args: Mapping[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: new_id("call"))


@dataclass(frozen=True, slots=True)
class Principal:
    """Who the agent acts for. Roles come from the config's ``people:`` directory when listed."""

    id: str = ANONYMOUS
    roles: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class CallContext:
    """Everything about a call that is not its arguments.

    ``user_request`` (what the user asked) and ``reasoning`` (why the agent makes this call)
    are stored with approval requests and shown to approvers. ``attrs`` holds any other
    fields a policy may test as ``context.NAME``.
    """

    principal: Principal = field(default_factory=Principal)
    thread: str = "default"
    agent: str | None = None
    environment: str | None = None
    time: datetime | None = None  # None = the moment the field is read (each call's own time)
    user_request: str | None = None
    reasoning: str | None = None
    attrs: Mapping[str, Any] = field(default_factory=dict)

    #: Fields a policy can read as ``context.<name>`` besides ``attrs``.
    FIELDS = ("thread", "agent", "environment", "time", "user_request", "reasoning")

    def field(self, name: str) -> Any:
        """The value of ``context.<name>``; raises KeyError when absent (never getattr on input)."""
        if name == "time":
            return self.time if self.time is not None else utcnow()
        if name in CallContext.FIELDS:
            value = getattr(self, name)
            if value is None:
                raise KeyError(name)
            return value
        return self.attrs[name]
