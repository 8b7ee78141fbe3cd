"""Cross-process wake-up for SQLite: a ``PRAGMA data_version`` watcher.

When another process (the CLI deciding from a second terminal, ``signoff serve`` next to an
agent) commits to the same file, the cheap truth is ``PRAGMA data_version``: a per-connection
counter that changes when *another* connection has committed (~6 µs to read, research §2.3).
The watcher thread reads it whenever the other process rings this one's doorbell
(:mod:`._sqlite_wake`, a datagram right after its commit), and every ``safety_s`` for writers
that cannot ring. Without a doorbell it polls every ``interval_s`` (50 ms by default: ~25 ms
median wake). It runs only while someone waits or listens.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable

from signoff._failing import Failing
from signoff.store._sqlite_wake import Doorbell

log = logging.getLogger("signoff.store")


class DataVersionWatcher:
    """Calls ``on_change(conn)`` after other connections commit, while ``wanted()`` is true."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        on_change: Callable[[sqlite3.Connection, bool], None],
        wanted: Callable[[], bool],
        *,
        interval_s: float,
        name: str,
        doorbell: Doorbell | None = None,
        safety_s: float = 1.0,
        on_idle: Callable[[], None] = lambda: None,
    ) -> None:
        self._on_idle = on_idle  # before the thread ends: nothing watches from then on
        self._connect = connect
        self._doorbell = doorbell
        self._safety = max(safety_s, interval_s)
        self._on_change = on_change
        self._wanted = wanted
        self._interval = interval_s
        self._name = name
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.checks = 0
        self.changes = 0
        self.rung = 0  # wake-ups by the doorbell
        self.doorbell_works = False

    @property
    def running(self) -> bool:
        return self._thread is not None

    def ensure_running(self) -> None:
        with self._lock:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            thread = self._thread
        if self._doorbell is not None:
            self._doorbell.interrupt()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        try:
            conn = self._connect()
        except Exception:
            log.exception("data_version watcher could not connect; cross-process wake is off")
            self._idle()
            return
        try:
            self._watch(conn)
        finally:
            conn.close()

    def _watch(self, conn: sqlite3.Connection) -> None:
        # Bound before the first look: a commit after that look rings us.
        self.doorbell_works = self._doorbell is not None and self._doorbell.listen() is not None
        last: int | None = None  # None: look once at start, a commit may predate our first read
        failing = Failing(log, "data_version watcher's read")
        while True:
            with self._lock:
                if self._stop.is_set() or not self._wanted():
                    self._idle_locked()
                    return
            try:
                version = int(conn.execute("PRAGMA data_version").fetchone()[0])
                self.checks += 1
                if version != last:
                    self._on_change(conn, last is None)
                    self.changes += 1
                    last = version
            except Exception as exc:
                failing.failed(exc)
            else:
                failing.worked()
            if self._sleep():
                self._idle()
                return

    def _idle(self) -> None:
        with self._lock:
            self._idle_locked()

    def _idle_locked(self) -> None:
        try:
            self._on_idle()
        finally:
            self._thread = None

    def _sleep(self) -> bool:
        """Until the doorbell rings, the next look is due, or stop; True on stop."""
        if self.doorbell_works and self._doorbell is not None:
            if self._doorbell.wait(self._safety):
                self.rung += 1
            return self._stop.is_set()
        return self._stop.wait(self._interval)
