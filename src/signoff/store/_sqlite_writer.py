"""The one thread that writes to a SQLite store.

Why one thread: SQLite allows one writer at a time anyway, so a single connection that runs
each *whole* transaction as one job is the fastest shape measured (research §2.1: 0.45-0.55 ms
per FULL transaction, against 0.6-0.7 ms for one thread hop per statement), it needs no
connection pool, and the ``BEGIN IMMEDIATE`` it issues serializes it against other processes.
Async callers submit a job and await ``asyncio.wrap_future`` of its future, which works from
any event loop.

The same thread group-commits ``audit_nowait`` events: the hot path appends to a deque (atomic
in CPython, no lock) and takes the lock only to arm the timer when the queue was idle; the
writer chains and commits the batch at most ``batch_interval_s`` after the first queued event,
as soon as ``batch_max`` are queued, on ``flush``, and at ``stop``.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from signoff.model import AuditEvent, StoreError

log = logging.getLogger("signoff.store")

T = TypeVar("T")
Job = Callable[[sqlite3.Connection], Any]
BatchWriter = Callable[[sqlite3.Connection, list[AuditEvent]], None]


class WriterThread:
    """Owns the write connection; runs jobs in submission order; batches audit events."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        write_batch: BatchWriter,
        *,
        name: str,
        batch_interval_s: float = 0.1,
        batch_max: int = 1000,
    ) -> None:
        self._connect = connect
        self._write_batch = write_batch
        self._interval = batch_interval_s
        self._batch_max = batch_max
        self._cond = threading.Condition(threading.Lock())
        self._jobs: deque[tuple[Job, Future[Any]]] = deque()
        self._audit: deque[AuditEvent] = deque()
        self._audit_due = 0.0
        self._armed = False  # the writer knows events are queued and when to commit them
        self._stopping = False
        self._failure: str | None = None  # why the thread could not start, once known
        self._retry_delay = batch_interval_s
        self._ready: Future[None] = Future()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.lost_events = 0
        self.audit_error: str | None = None  # why the last batch failed; None once one works
        self.batches = 0
        self.batched_events = 0

    # ---------------------------------------------------------------- public
    def start(self) -> Future[None]:
        """Start the thread; the future resolves once the connection is open and migrated."""
        self._thread.start()
        return self._ready

    def submit(self, job: Callable[[sqlite3.Connection], T]) -> Future[T]:
        fut: Future[T] = Future()
        with self._cond:
            if self._stopping:
                raise self._refusal()
            self._jobs.append((job, fut))
            self._cond.notify()
        return fut

    def queue_audit(self, event: AuditEvent) -> None:
        if self._stopping:
            raise self._refusal("; the audit event was not recorded")
        self._audit.append(event)
        if not self._armed or len(self._audit) == self._batch_max:  # a missed crossing: timer
            self._arm(self._interval)

    def _arm(self, delay: float) -> None:
        with self._cond:
            if not self._armed:
                self._armed = True
                self._audit_due = time.monotonic() + delay
            self._cond.notify()

    def _take_batch(self) -> list[AuditEvent]:
        """Everything queued so far. Disarm *first*: an event appended after this re-arms."""
        self._armed = False
        batch = []
        while True:
            try:
                batch.append(self._audit.popleft())
            except IndexError:
                return batch

    def flush(self) -> Future[None]:
        """A job that commits every event queued before it."""
        return self.submit(self._flush_now)

    def _refusal(self, suffix: str = "") -> StoreError:
        if self._failure is not None:
            return StoreError(f"the SQLite store could not be opened: {self._failure}{suffix}")
        return StoreError(f"the SQLite store is closed{suffix}")

    @property
    def queued_audit(self) -> int:
        return len(self._audit)

    def stop(self, timeout: float | None = None) -> None:
        """Run the jobs already submitted, flush the audit queue, close the connection."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        if self._audit and not self._thread.is_alive():
            late = len(self._audit)  # queued by a thread racing with close, after the last flush
            self.lost_events += late
            log.error("audit events queued during close were not written", extra={"events": late})

    # ---------------------------------------------------------------- the thread
    def _run(self) -> None:
        try:
            conn = self._connect()
        except BaseException as exc:
            with self._cond:
                self._stopping = True
                self._failure = str(exc)
                pending, self._jobs = list(self._jobs), deque()
            self._ready.set_exception(exc)
            for _, fut in pending:
                fut.set_exception(self._refusal())
            return
        self._ready.set_result(None)
        try:
            self._loop(conn)
            if self._audit:  # appended while the last batch was being written
                self._flush_batch(conn, self._take_batch(), final=True)
        finally:
            conn.close()

    def _loop(self, conn: sqlite3.Connection) -> None:
        while True:
            job, batch, done = self._next()
            if batch:
                self._flush_batch(conn, batch, final=done)
            if job is not None:
                self._run_job(conn, *job)
            if done:
                return

    def _next(self) -> tuple[tuple[Job, Future[Any]] | None, list[AuditEvent], bool]:
        with self._cond:
            while True:
                now = time.monotonic()
                batch_due = (self._armed or self._stopping) and (
                    self._stopping or now >= self._audit_due or len(self._audit) >= self._batch_max
                )
                if batch_due:
                    # Disarm before looking: a producer appends, then reads _armed, so an event
                    # we do not see here finds the timer disarmed and arms it again.
                    self._armed = False
                    if self._audit:
                        return None, self._take_batch(), self._stopping and not self._jobs
                if self._jobs:
                    return self._jobs.popleft(), [], False
                if self._stopping:
                    return None, [], True
                self._cond.wait(max(0.0, self._audit_due - now) if self._armed else None)

    @staticmethod
    def _run_job(conn: sqlite3.Connection, job: Job, fut: Future[Any]) -> None:
        if not fut.set_running_or_notify_cancel():
            return  # the caller gave up before we started: do nothing
        try:
            result = job(conn)
        except BaseException as exc:
            fut.set_exception(exc)
        else:
            fut.set_result(result)

    def _flush_batch(self, conn: sqlite3.Connection, batch: list[AuditEvent], final: bool) -> None:
        try:
            self._write_batch(conn, batch)
        except Exception as exc:
            self.audit_error = f"{type(exc).__name__}: {exc}"
            if final:
                self.lost_events += len(batch)
                log.exception(
                    "audit batch could not be written at close; events lost",
                    extra={"events": len(batch)},
                )
                return
            log.exception(
                "audit batch could not be written; will retry",
                extra={"events": len(batch), "retry_in_s": self._retry_delay},
            )
            self._audit.extendleft(reversed(batch))
            self._arm(self._retry_delay)
            self._retry_delay = min(self._retry_delay * 2, 5.0)  # e.g. a full disk: don't spin
            return
        self._retry_delay = self._interval
        self.audit_error = None
        self.batches += 1
        self.batched_events += len(batch)

    def _flush_now(self, conn: sqlite3.Connection) -> None:
        with self._cond:
            batch = self._take_batch()
        if not batch:
            return
        try:
            self._write_batch(conn, batch)
        except BaseException as exc:
            self.audit_error = f"{type(exc).__name__}: {exc}"
            self._audit.extendleft(reversed(batch))
            self._arm(self._interval)
            raise
        self.audit_error = None
        self.batches += 1
        self.batched_events += len(batch)
