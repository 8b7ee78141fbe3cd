"""How a background loop reports that it keeps failing: once, then now and then, then "back".

The gate's sweeper, its grant refresh, the delivery worker, the SQLite data_version watcher
and the PostgreSQL LISTEN loop each retry on their own cadence (from 50 ms to a few seconds).
When the store is down or closed under them, logging a traceback per pass buries everything
else in the log (the watcher alone would write twenty a second). :class:`Failing` logs the
first failure with its traceback, the same failure again at most once per ``remind_s``
(one line, with how many passes failed since when), a *different* failure at once with its
traceback, and one line when a pass works again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

REMIND_S = 60.0


class Failing:
    """The failure log of one background loop (see the module docstring); thread-safe."""

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        *,
        level: int = logging.ERROR,
        remind_s: float = REMIND_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.what = what
        self.level = level
        self.remind_s = remind_s
        self._clock = clock
        self._lock = threading.Lock()
        self._key: tuple[type[BaseException], str] | None = None
        self.failures = 0  # passes failed in a row
        self._since = 0.0
        self._said_at = 0.0

    def failed(
        self, exc: BaseException, *, retrying: str = "retrying", traceback: bool = True
    ) -> None:
        """A pass failed with ``exc`` (call from the ``except`` block); ``traceback``: log
        a new failure's traceback (not for an expected one, such as a lost connection)."""
        now = self._clock()
        key = (type(exc), str(exc))
        with self._lock:
            first = self.failures == 0
            if first:
                self._since = now
            self.failures += 1
            if first or key != self._key:
                self._key = key
                self._said_at = now
                say = "new"
            elif now - self._said_at >= self.remind_s:
                self._said_at = now
                say = "again"
            else:
                return
            failures, since = self.failures, now - self._since
        if say == "new":
            self.logger.log(
                self.level,
                "%s failed; %s",
                self.what,
                retrying,
                exc_info=exc if traceback else None,
                extra={"error": f"{type(exc).__name__}: {exc}"},
            )
        else:
            self.logger.log(
                self.level,
                "%s still failing: %d passes in %.0f s, the last with %s: %s",
                self.what,
                failures,
                since,
                type(exc).__name__,
                exc,
            )

    def worked(self) -> None:
        """A pass worked: say so once if it had been failing."""
        if not self.failures:  # the usual case, without taking the lock (one loop per log)
            return
        with self._lock:
            failures, since = self.failures, self._clock() - self._since
            self.failures = 0
            self._key = None
        if failures:
            self.logger.warning(
                "%s works again after %d failed passes over %.0f s", self.what, failures, since
            )
