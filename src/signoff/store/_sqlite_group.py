"""One group commit on the SQLite writer: the jobs queued at that moment, one transaction.

Why: under ``synchronous=FULL`` every COMMIT is an fsync (0.3 ms on a quiet disk, several ms on
a busy one), so committing each job alone caps the store at one job per fsync whatever the
Python costs. The writer instead runs every job it finds queued inside one ``BEGIN IMMEDIATE …
COMMIT``:

* each job runs in a ``SAVEPOINT``: a job that raises rolls back alone (``ROLLBACK TO``) and
  the others still commit;
* each caller is answered only after the ``COMMIT`` covering its job returned (after the
  fsync): a process killed mid-group has answered nobody in it, and the WAL drops the whole
  uncommitted group on the next open;
* what a job wants done once it is durable (waking waiters, telling listeners) is registered
  with :meth:`Group.after_commit` and runs only after that COMMIT, and never for a job whose
  savepoint or group rolled back;
* when SQLite itself ends the transaction (a full disk or an I/O error rolls back the whole
  transaction, not the statement), or the COMMIT fails, every job of the group that had
  succeeded is answered with that error instead: nothing of it was written.

The audit chain's head (``seq``, ``prev_hash``) is read inside the transaction by each append,
so a rolled-back savepoint or group leaves it where the database has it: no cached copy to
restore.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from signoff.model import StoreError

log = logging.getLogger("signoff.store")

Job = Callable[[sqlite3.Connection], Any]
Errors = Callable[[str], AbstractContextManager[None]]


@dataclass(slots=True)
class _Outcome:
    fut: Future[Any]
    result: Any = None
    error: BaseException | None = None
    after: list[Callable[[], None]] = field(default_factory=list)


class Group:
    """Runs jobs in savepoints of one transaction; :meth:`commit` answers them all."""

    def __init__(self, conn: sqlite3.Connection, errors: Errors) -> None:
        self.conn = conn
        self._errors = errors
        self._outcomes: list[_Outcome] = []
        self._running: _Outcome | None = None

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once the running job's work is committed (never if it is not)."""
        if self._running is None:
            raise RuntimeError("after_commit is for jobs running on the SQLite writer")
        self._running.after.append(callback)

    def run(self, job: Job, fut: Future[Any]) -> BaseException | None:
        """Run ``job`` in a savepoint; its caller is answered by :meth:`commit`. Returns the
        job's error, if it failed."""
        if not fut.set_running_or_notify_cancel():
            return None  # the caller gave up before we started: do nothing
        outcome = _Outcome(fut)
        self._outcomes.append(outcome)
        try:
            if not self.conn.in_transaction:  # the first job, or SQLite ended the group
                with self._errors("starting a write transaction"):
                    self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute("SAVEPOINT job")
        except BaseException as exc:
            outcome.error = exc
            return exc
        self._running = outcome
        try:
            outcome.result = job(self.conn)
            self.conn.execute("RELEASE job")
        except BaseException as exc:
            outcome.error, outcome.after = exc, []
            self._undo(exc)
        finally:
            self._running = None
        return outcome.error

    def _undo(self, exc: BaseException) -> None:
        if self.conn.in_transaction:
            try:
                self.conn.execute("ROLLBACK TO job")
                self.conn.execute("RELEASE job")
                return
            except sqlite3.Error:
                log.exception("rolling back a job's savepoint failed; rolling back its group")
                self._rollback()
        self._lose(exc)  # SQLite rolled the whole transaction back: earlier jobs' work too

    def _rollback(self) -> None:
        if self.conn.in_transaction:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:
                log.exception("ROLLBACK of a write group failed")

    def _lose(self, cause: BaseException) -> None:
        """Every job that had succeeded so far was rolled back with the transaction."""
        for outcome in self._outcomes:
            if outcome.error is None:
                outcome.error = StoreError(
                    f"the write was rolled back with the other writes committed with it: {cause}"
                )
                outcome.error.__cause__ = cause
                outcome.after = []

    def commit(self) -> bool:
        """COMMIT; False when nothing of the group was written. Answers nobody yet."""
        if not self.conn.in_transaction:
            return True
        try:
            with self._errors("committing"):
                self.conn.execute("COMMIT")
        except BaseException as exc:
            self._rollback()
            self._lose(exc)
            return False
        return True

    def answer(self) -> None:
        """After :meth:`commit`: run the committed jobs' callbacks, answer every caller."""
        for outcome in self._outcomes:
            if outcome.error is not None:
                outcome.fut.set_exception(outcome.error)
                continue
            for callback in outcome.after:
                try:
                    callback()
                except Exception:  # a committed change stays committed and answered
                    log.exception("an after-commit callback raised")
            outcome.fut.set_result(outcome.result)

    @property
    def succeeded(self) -> bool:
        """Some job's work is in the database (once :meth:`commit` returned True)."""
        return any(outcome.error is None for outcome in self._outcomes)

    @property
    def jobs(self) -> int:
        return len(self._outcomes)
