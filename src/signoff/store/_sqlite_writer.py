"""The one thread that writes to a SQLite store.

Why one thread: SQLite allows one writer at a time anyway, so a single connection that runs
each *whole* transaction as one job is the fastest shape measured (research §2.1), it needs
no connection pool, and the ``BEGIN IMMEDIATE`` it issues serializes it against other
processes. Async callers submit a job and await ``asyncio.wrap_future`` of its future, which
works from any event loop.

Group commit (:mod:`._sqlite_group`): each time it wakes, the thread takes *every* job queued
at that moment and runs them in one ``BEGIN IMMEDIATE … COMMIT``, a savepoint per job, and
answers each caller only after that COMMIT. Eight agents then share one fsync instead of
queueing for eight.

The same thread group-commits ``audit_nowait`` events: the hot path appends to a deque (atomic
in CPython, no lock) and takes the lock only to arm the timer when the queue was idle; the
writer chains and commits the batch at most ``batch_interval_s`` after the first queued event,
as soon as ``batch_max`` are queued, on ``flush``, at ``stop`` — and with any group of jobs
committed before that (one fsync for both), unless the last batch failed and waits out its
retry delay.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from signoff.model import AuditEvent, StoreError
from signoff.store._sqlite_group import Errors, Group, LoopReply, Reply, answer, new_loop_reply

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
        errors: Errors,
        on_commit: Callable[[], None] = lambda: None,
        on_begin: Callable[[sqlite3.Connection], bool] | None = None,
        on_committed: Callable[[], None] = lambda: None,
        batch_interval_s: float = 0.1,
        batch_max: int = 1000,
        group_max: int = 256,
    ) -> None:
        self._connect = connect
        self._write_batch = write_batch
        self._errors = errors
        self._on_commit = on_commit  # after each COMMIT that wrote something
        self._on_begin = on_begin  # after each BEGIN IMMEDIATE (see Group; must not raise)
        self._on_committed = on_committed  # after a COMMIT that wrote, before any answer
        self._group_max = group_max
        self._group: Group | None = None  # the group running on the thread, if any
        self._answering: Group | None = None  # the group whose callers are being answered
        self._kicks: set[asyncio.AbstractEventLoop] = set()  # loops with a _kick scheduled
        self._batch_error: BaseException | None = None  # of the running group's audit batch
        self._flush_job = self._flushed  # one object, so _next can recognise flushes
        self._interval = batch_interval_s
        self._batch_max = batch_max
        # ``with self._lock`` holds the condition's lock as ``with self._cond`` would,
        # without Condition.__enter__/__exit__'s two Python calls (once per job)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._jobs: deque[tuple[Job, Reply]] = deque()
        self._audit: deque[AuditEvent] = deque()
        self._audit_due = 0.0
        self._armed = False  # the writer knows events are queued and when to commit them
        self._stopping = False
        self._failure: str | None = None  # why the thread could not start, once known
        self._retry_delay = batch_interval_s
        self._ready: Future[None] = Future()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._ident: int | None = None  # the thread's, once it runs (cheaper to compare)
        self.lost_events = 0
        self.audit_error: str | None = None  # why the last batch failed; None once one works
        self.batches = 0
        self.batched_events = 0
        self.groups = 0  # transactions committed (or tried)
        self.group_jobs = 0  # jobs run in them
        self.busy_s = 0.0  # time from BEGIN to the last caller answered, summed
        # the writer thread's own CPU time over the same spans: unlike busy_s, not inflated
        # by waiting for the GIL or the disk
        self.busy_cpu_s = 0.0

    # ---------------------------------------------------------------- public
    def start(self) -> Future[None]:
        """Start the thread; the future resolves once the connection is open and migrated."""
        self._thread.start()
        return self._ready

    def submit(self, job: Callable[[sqlite3.Connection], T]) -> Future[T]:
        fut: Future[T] = Future()
        self._queue(job, fut)
        return fut

    async def run(self, job: Callable[[sqlite3.Connection], T]) -> T:
        """``submit`` for a caller on an event loop, answered straight into that loop."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        self._queue(job, new_loop_reply(LoopReply, (loop, fut)), wake=False)
        if loop not in self._kicks:  # else the writer is woken at this loop's next turn
            self._kicks.add(loop)
            loop.call_soon(self._kick, loop)
        return await fut

    def _kick(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wake the writer for every job this loop queued in its last turn: the jobs of
        several tasks then start one group instead of the first one starting it alone."""
        self._kicks.discard(loop)
        with self._lock:
            self._cond.notify()

    def _queue(self, job: Job, reply: Reply, *, wake: bool = True) -> None:
        with self._lock:
            if self._stopping:
                raise self._refusal()
            self._jobs.append((job, reply))
            if wake:
                self._cond.notify()

    def queue_audit(self, event: AuditEvent) -> None:
        if self._stopping:
            raise self._refusal("; the audit event was not recorded")
        self._audit.append(event)
        if not self._armed or len(self._audit) == self._batch_max:  # a missed crossing: timer
            self._arm(self._interval)

    def _arm(self, delay: float) -> None:
        with self._lock:
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

    def after_commit(self, callback: Callable[[], None]) -> None:
        """From inside a job: run ``callback`` once the job's writes are committed."""
        group = self._group
        if group is None or threading.get_ident() != self._ident:
            raise RuntimeError("after_commit is for jobs running on the SQLite writer")
        group.after_commit(callback)

    def call_in_loop(self, loop: asyncio.AbstractEventLoop, call: Callable[[], None]) -> None:
        """From an after-commit callback: run ``call`` on ``loop``, in the hop that answers
        that loop's callers of the group when there is one (else a hop of its own)."""
        group = self._answering
        if group is None or not group.call_in_loop(loop, call):
            loop.call_soon_threadsafe(call)

    def savepoint(self) -> None:
        """From inside a :class:`~._sqlite_group.SelfAtomic` job: open its savepoint now."""
        group = self._group
        if group is None or threading.get_ident() != self._ident:
            raise RuntimeError("savepoint is for jobs running on the SQLite writer")
        group.savepoint()

    def flush(self) -> Future[None]:
        """A job that commits every event queued before it (it fails if they could not be)."""
        return self.submit(self._flush_job)

    def _refusal(self, suffix: str = "") -> StoreError:
        if self._failure is not None:
            return StoreError(f"the SQLite store could not be opened: {self._failure}{suffix}")
        return StoreError(f"the SQLite store is closed{suffix}")

    @property
    def queued_audit(self) -> int:
        return len(self._audit)

    def stop(self, timeout: float | None = None) -> None:
        """Run the jobs already submitted, flush the audit queue, close the connection."""
        with self._lock:
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
        self._ident = threading.get_ident()
        try:
            conn = self._connect()
        except BaseException as exc:
            with self._lock:
                self._stopping = True
                self._failure = str(exc)
                pending, self._jobs = list(self._jobs), deque()
            if not self._ready.done():  # a start-up that was given up on: nobody to tell
                self._ready.set_exception(exc)
            answer([(reply, None, self._refusal()) for _, reply in pending])
            return
        if not self._ready.done():
            self._ready.set_result(None)
        try:
            self._loop(conn)
            if self._audit:  # appended while the last batch was being written
                self._commit_group(conn, [], self._take_batch(), final=True)
        finally:
            conn.close()

    def _loop(self, conn: sqlite3.Connection) -> None:
        while True:
            jobs, batch, done = self._next()
            if jobs or batch:
                self._commit_group(conn, jobs, batch, final=done)
            if done:
                return

    def _next(self) -> tuple[list[tuple[Job, Reply]], list[AuditEvent], bool]:
        """The next group: every queued job (up to ``group_max``) and, when due or worth
        sharing the jobs' fsync, every queued audit event; and whether it is the last."""
        with self._lock:
            while True:
                now = time.monotonic()
                batch_due = (self._armed or self._stopping) and (
                    self._stopping or now >= self._audit_due or len(self._audit) >= self._batch_max
                )
                if batch_due:
                    # Disarm before looking: a producer appends, then reads _armed, so an event
                    # we do not see here finds the timer disarmed and arms it again.
                    self._armed = False
                jobs: list[tuple[Job, Reply]] = []
                while self._jobs and len(jobs) < self._group_max:
                    jobs.append(self._jobs.popleft())
                share = bool(jobs) and (
                    self.audit_error is None or any(job is self._flush_job for job, _ in jobs)
                )
                batch = self._take_batch() if self._audit and (batch_due or share) else []
                if jobs or batch:
                    return jobs, batch, self._stopping and not self._jobs and not self._audit
                if self._stopping:
                    return [], [], True
                self._cond.wait(max(0.0, self._audit_due - now) if self._armed else None)

    def _gather(self, room: int) -> list[tuple[Job, Reply]]:
        """Jobs queued while the group ran, to share its COMMIT: with 8 agents the writer,
        holding the GIL less, otherwise commits groups of two or three. Not past a flush
        job: the audit events it answers for were taken when the group started."""
        more: list[tuple[Job, Reply]] = []
        with self._lock:
            while self._jobs and len(more) < room and self._jobs[0][0] is not self._flush_job:
                more.append(self._jobs.popleft())
        return more

    def _commit_group(
        self,
        conn: sqlite3.Connection,
        jobs: list[tuple[Job, Reply]],
        batch: list[AuditEvent],
        final: bool,
    ) -> None:
        started, started_cpu = time.perf_counter(), time.thread_time()
        alone = len(jobs) + bool(batch) == 1
        group = Group(conn, self._errors, alone=alone, on_begin=self._on_begin)
        self._group = group
        audited: Future[None] | None = None  # the batch's answer (a Future only with one)
        try:
            if batch:  # first: the flushes in this group answer for it
                audited = Future()
                self._batch_error = group.run(lambda c: self._write_batch(c, batch), audited)
            ran = 0
            while jobs:
                for job, fut in jobs:
                    group.run(job, fut)
                ran += len(jobs)
                # (a lone job ran without a savepoint: nothing may join its transaction)
                jobs = [] if alone else self._gather(self._group_max - ran)
        finally:
            self._group = None
            self._batch_error = None
            wrote = group.commit() and group.succeeded
            if wrote:
                self._hook(self._on_committed)
            self.groups += 1
            self.group_jobs += group.jobs
            self.busy_s += time.perf_counter() - started
            self.busy_cpu_s += time.thread_time() - started_cpu
            self._answering = group
            try:
                group.answer()
            finally:
                self._answering = None
            if wrote:  # after this process's callers: their wake-up is the latency target
                self._ring()
        if audited is not None:
            self._settle_batch(batch, audited.exception(), final)

    def _ring(self) -> None:
        self._hook(self._on_commit)  # a hint for other processes; their watchers still poll

    @staticmethod
    def _hook(hook: Callable[[], None]) -> None:
        try:
            hook()
        except Exception:
            log.exception("an after-commit hook raised")

    def _flushed(self, conn: sqlite3.Connection) -> None:
        """The flush job: its group carries every queued event; fail if they failed."""
        if self._batch_error is not None:
            raise self._batch_error

    def _settle_batch(
        self, batch: list[AuditEvent], error: BaseException | None, final: bool
    ) -> None:
        if error is None:
            self._retry_delay = self._interval
            self.audit_error = None
            self.batches += 1
            self.batched_events += len(batch)
            return
        self.audit_error = f"{type(error).__name__}: {error}"
        if final:
            self.lost_events += len(batch)
            log.error(
                "audit batch could not be written at close; events lost",
                extra={"events": len(batch)},
                exc_info=error,
            )
            return
        log.error(
            "audit batch could not be written; will retry",
            extra={"events": len(batch), "retry_in_s": self._retry_delay},
            exc_info=error,
        )
        self._audit.extendleft(reversed(batch))
        self._arm(self._retry_delay)
        self._retry_delay = min(self._retry_delay * 2, 5.0)  # e.g. a full disk: don't spin
