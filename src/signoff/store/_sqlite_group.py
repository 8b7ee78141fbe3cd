"""One group commit on the SQLite writer: the jobs queued at that moment, one transaction.

Why: under ``synchronous=FULL`` every COMMIT is an fsync (0.3 ms on a quiet disk, several ms on
a busy one), so committing each job alone caps the store at one job per fsync whatever the
Python costs. The writer instead runs every job it finds queued inside one ``BEGIN IMMEDIATE …
COMMIT``:

* each job runs in a ``SAVEPOINT``: a job that raises rolls back alone (``ROLLBACK TO``) and
  the others still commit (a group of one job needs none: its failure rolls back the
  transaction, which holds nothing else);
* each caller is answered only after the ``COMMIT`` covering its job returned (after the
  fsync): a process killed mid-group has answered nobody in it, and the WAL drops the whole
  uncommitted group on the next open;
* what a job wants done once it is durable (waking waiters, telling listeners) is registered
  with :meth:`Group.after_commit` and runs only after that COMMIT, and never for a job whose
  savepoint or group rolled back;
* when SQLite itself ends the transaction (a full disk or an I/O error rolls back the whole
  transaction, not the statement), or the COMMIT fails, every job of the group that had
  succeeded is answered with that error instead: nothing of it was written.

The audit chain's head (``seq``, ``prev_hash``) is read inside the transaction by the group's
first append and kept for the next ones (:class:`~._sqlite_rows.ChainHead`), which also holds
the group's sealed audit rows until one ``executemany`` inserts them all before the COMMIT (a
failing insert fails the group like a failing COMMIT); a rolled-back savepoint takes its
job's rows back out, a rolled-back transaction drops them all, and the next append reads the
head again where the database has it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

from signoff.model import StoreError
from signoff.store import _sqlite_rows as rows

log = logging.getLogger("signoff.store")

Job = Callable[[sqlite3.Connection], Any]
Errors = Callable[[str], AbstractContextManager[None]]


class SelfAtomic:
    """A job that writes at most one statement unless it asks for a savepoint first
    (:meth:`Group.savepoint`, before its first write). Such a job runs without ``SAVEPOINT``
    / ``RELEASE`` — two statements, each a GIL hand-off on the writer — because a failing
    statement is undone by SQLite itself and a job failing before its write wrote nothing."""

    __slots__ = ("job",)

    def __init__(self, job: Job) -> None:
        self.job = job

    def __call__(self, conn: sqlite3.Connection) -> Any:
        return self.job(conn)


class LoopReply(NamedTuple):
    """The asyncio future of a caller on ``loop``. A group answers all of one loop's callers
    with one ``call_soon_threadsafe`` (one wake-up of that loop, not one per job)."""

    loop: asyncio.AbstractEventLoop
    fut: asyncio.Future[Any]


# LoopReply(...) without the named tuple's Python-level __new__ (once per write)
new_loop_reply: Callable[[type[LoopReply], tuple[Any, ...]], LoopReply] = tuple.__new__


Reply = Future[Any] | LoopReply


LoopCalls = dict[asyncio.AbstractEventLoop, list[Callable[[], None]]]


def answer(
    replies: list[tuple[Reply, Any, BaseException | None]], calls: LoopCalls | None = None
) -> None:
    """Set every reply; one hop into each event loop, which first runs that loop's ``calls``
    (say, waking the waiters of a request the group finished)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Reply, Any, BaseException | None]]] = {}
    for loop in calls or ():
        by_loop[loop] = []
    for item in replies:
        reply = item[0]
        if isinstance(reply, LoopReply):
            by_loop.setdefault(reply.loop, []).append(item)
        elif reply.done():  # its caller gave up (cancelled): nobody waits for it
            continue
        elif item[2] is not None:
            reply.set_exception(item[2])
        else:
            reply.set_result(item[1])
    for loop, items in by_loop.items():
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_settle, items, calls.get(loop) if calls else None)


def _settle(
    items: list[tuple[Reply, Any, BaseException | None]],
    calls: list[Callable[[], None]] | None = None,
) -> None:
    for call in calls or ():
        try:
            call()
        except Exception:  # one failing wake must not leave the callers unanswered
            log.exception("a call handed to an event loop after a commit raised")
    for reply, result, error in items:
        assert isinstance(reply, LoopReply)
        if reply.fut.done():
            continue
        if error is not None:
            reply.fut.set_exception(error)
        else:
            reply.fut.set_result(result)


class _Outcome:
    """One job's answer, and what it wants run once committed (a list only when it does)."""

    __slots__ = ("after", "error", "fut", "result")

    def __init__(self, fut: Reply) -> None:
        self.fut = fut
        self.result: Any = None
        self.error: BaseException | None = None
        self.after: list[Callable[[], None]] | None = None


class Group:
    """Runs jobs in savepoints of one transaction; :meth:`commit` answers them all."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        errors: Errors,
        *,
        alone: bool = False,
        on_begin: Callable[[sqlite3.Connection], bool] | None = None,
    ) -> None:
        self.conn = conn
        # right after each BEGIN IMMEDIATE; must not raise; True when no other connection
        # committed since this one's last COMMIT (then the chain head it left still holds)
        self._on_begin = on_begin
        self._errors = errors
        self._savepoints = not alone  # ``alone``: this group will run exactly one job
        self._outcomes: list[_Outcome] = []
        self._running: _Outcome | None = None
        self._in_savepoint = False  # the running job's savepoint is open
        self._chain = rows.track_chain_head(conn)
        self._loop_calls: LoopCalls | None = None  # collected while answering

    def call_in_loop(self, loop: asyncio.AbstractEventLoop, call: Callable[[], None]) -> bool:
        """From an after-commit callback: run ``call`` on ``loop`` in the same hop as that
        loop's answers (one wake-up of it). False when not answering now (then the caller
        makes its own hop)."""
        if self._loop_calls is None:
            return False
        self._loop_calls.setdefault(loop, []).append(call)
        return True

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once the running job's work is committed (never if it is not)."""
        running = self._running
        if running is None:
            raise RuntimeError("after_commit is for jobs running on the SQLite writer")
        if running.after is None:
            running.after = [callback]
        else:
            running.after.append(callback)

    def savepoint(self) -> None:
        """From a :class:`SelfAtomic` job, before writing more than one statement."""
        if self._running is None:
            raise RuntimeError("savepoint is for jobs running on the SQLite writer")
        if self._savepoints and not self._in_savepoint:
            self.conn.execute("SAVEPOINT job")
            self._in_savepoint = True

    def run(self, job: Job, fut: Reply) -> BaseException | None:
        """Run ``job`` in a savepoint; its caller is answered by :meth:`answer`. Returns the
        job's error, if it failed."""
        # not when the caller gave up before we started (then the job does not run)
        if isinstance(fut, LoopReply):
            if fut.fut.done():  # read across threads: at worst the job runs unawaited
                return None
        elif not fut.set_running_or_notify_cancel():
            return None
        outcome = _Outcome(fut)
        self._outcomes.append(outcome)
        conn = self.conn
        body = job.job if isinstance(job, SelfAtomic) else job  # (not through its __call__)
        try:
            if not conn.in_transaction:  # the first job, or SQLite ended the group
                self._chain.drop()
                try:
                    conn.execute("BEGIN IMMEDIATE")
                except sqlite3.Error:  # the errors' context manager only when one happened
                    with self._errors("starting a write transaction"):
                        raise
                if self._on_begin is not None and self._on_begin(conn):
                    rows.resume_chain(conn, self._chain)
                else:
                    rows.forget_committed(conn)
            self._in_savepoint = False
            if self._savepoints and body is job:
                conn.execute("SAVEPOINT job")
                self._in_savepoint = True
        except BaseException as exc:
            outcome.error = exc
            return exc
        self._running = outcome
        mark = len(self._chain.pending)  # ChainHead.mark, inline
        try:
            outcome.result = body(conn)
            if self._in_savepoint:
                conn.execute("RELEASE job")
        except BaseException as exc:
            outcome.error, outcome.after = exc, None
            self._undo(exc, mark)
        finally:
            self._running = None
        return outcome.error

    def _undo(self, exc: BaseException, mark: int) -> None:
        if not self._savepoints:
            self._rollback()  # the job was the whole transaction
            return
        if self.conn.in_transaction and not self._in_savepoint:
            self._chain.undo_to(mark)  # a SelfAtomic job: its failed statement is undone
            return
        if self.conn.in_transaction:
            try:
                self.conn.execute("ROLLBACK TO job")
                self.conn.execute("RELEASE job")
                self._chain.undo_to(mark)  # the job's audit rows (if any) go with it
                return
            except sqlite3.Error:
                log.exception("rolling back a job's savepoint failed; rolling back its group")
                self._rollback()
        self._lose(exc)  # SQLite rolled the whole transaction back: earlier jobs' work too

    def _rollback(self) -> None:
        self._chain.drop()
        if self.conn.in_transaction:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:
                log.exception("ROLLBACK of a write group failed")

    def _lose(self, cause: BaseException) -> None:
        """Every job that had succeeded so far was rolled back with the transaction."""
        self._chain.drop()
        for outcome in self._outcomes:
            if outcome.error is None:
                outcome.error = StoreError(
                    f"the write was rolled back with the other writes committed with it: {cause}"
                )
                outcome.error.__cause__ = cause
                outcome.after = None

    def commit(self) -> bool:
        """COMMIT; False when nothing of the group was written. Answers nobody yet."""
        rows.untrack_chain_head(self.conn)  # the head is the database's again after this
        if not self.conn.in_transaction:
            return True
        try:
            try:
                self._chain.flush(self.conn)  # the group's audit rows: one executemany
                self.conn.execute("COMMIT")
            except sqlite3.Error:  # the errors' context manager only when one happened
                with self._errors("committing"):
                    raise
        except BaseException as exc:
            rows.forget_committed(self.conn)
            self._rollback()
            self._lose(exc)
            return False
        rows.committed(self.conn, self._chain)
        return True

    def answer(self) -> None:
        """After :meth:`commit`: run the committed jobs' callbacks, answer every caller."""
        replies: list[tuple[Reply, Any, BaseException | None]] = []
        calls: LoopCalls = {}
        self._loop_calls = calls
        for outcome in self._outcomes:
            if outcome.error is None and outcome.after is not None:
                for callback in outcome.after:
                    try:
                        callback()
                    except Exception:  # a committed change stays committed and answered
                        log.exception("an after-commit callback raised")
            replies.append((outcome.fut, outcome.result, outcome.error))
        self._loop_calls = None
        answer(replies, calls)

    @property
    def succeeded(self) -> bool:
        """Some job's work is in the database (once :meth:`commit` returned True)."""
        return any(outcome.error is None for outcome in self._outcomes)

    @property
    def jobs(self) -> int:
        return len(self._outcomes)
