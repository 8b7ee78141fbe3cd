"""``SQLiteStore``: the default, zero-setup store — one file, WAL, ``synchronous=FULL``.

Three threads, each with its own connection:

* the **writer** (:mod:`._sqlite_writer`) runs every write transaction whole, as one job,
  with ``BEGIN IMMEDIATE`` (so other processes writing the same file queue behind the busy
  timeout instead of failing on a lock upgrade), group-commits the jobs queued together (a
  savepoint each, one fsync for all: :mod:`._sqlite_group`) and ``audit_nowait`` events, and
  rings the other processes' doorbells after each commit (:mod:`._sqlite_wake`);
* the **reader** serves reads, so an inbox listing never waits behind an fsync;
* the **watcher** (:mod:`._sqlite_watcher`) exists only while someone waits or listens, and
  wakes them when *another process* commits to the file (woken by its doorbell).

In-process waiters are woken by the writer right after the COMMIT that made their request
terminal. Every method can be awaited from any event loop.

Durability: ``synchronous=FULL`` by default — a commit survives power loss. ``NORMAL``
(``sqlite:///x.db?synchronous=normal``) survives an application crash but may roll the last
commits back after power loss or an OS crash; it is about 5x cheaper per commit.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import logging
import os
import secrets
import sqlite3
import threading
import weakref
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

from signoff.model import (
    ApprovalRequest,
    AuditEvent,
    AuditRecord,
    AuditVerification,
    NotFound,
    RequestQuarantined,
    StoreError,
    Transition,
    utcnow,
)
from signoff.model.grants import Grant
from signoff.model.requests import TERMINAL_STATUSES
from signoff.store import _sqlite_grants as grant_rows
from signoff.store import _sqlite_outbox as outbox_rows
from signoff.store import _sqlite_rows as rows
from signoff.store._idempotency import existing_request_id, fingerprints
from signoff.store._quarantine import (
    QuarantineLog,
    Read,
    Unreadable,
    parse_doc,
    split,
    to_request,
)
from signoff.store._sqlite_cache import Cached, DocCache, reads_back
from signoff.store._sqlite_check import check_file
from signoff.store._sqlite_group import SelfAtomic
from signoff.store._sqlite_prepared import Change, prepare_change
from signoff.store._sqlite_schema import (
    SYNCHRONOUS,
    connect,
    prepare,
    sqlite_errors,
    store_error,
)
from signoff.store._sqlite_seal import unsealed_all
from signoff.store._sqlite_wake import Doorbell
from signoff.store._sqlite_watcher import DataVersionWatcher
from signoff.store._sqlite_writer import WriterThread
from signoff.store._waiting import (
    Listeners,
    Waiters,
    listener_event,
    settle_made,
    wait_until_terminal,
)
from signoff.store._working import working_copy
from signoff.store.audit import GENESIS_HASH, ChainVerifier
from signoff.store.base import (
    PROMPT_KINDS,
    AuditQuery,
    ChangeListener,
    Mutation,
    OutboxItem,
    OutboxOutcome,
    QuarantinedRequest,
    RequestCounts,
    StoreCheck,
)

log = logging.getLogger("signoff.store")

T = TypeVar("T")
_VERIFY_CHUNK = 2000


class SQLiteStore:
    """Approval requests and the audit log in one SQLite file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "FULL",
        busy_timeout_ms: int = 5000,
        wake_interval_s: float = 0.05,
    ) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.synchronous = synchronous.upper()
        if self.synchronous not in SYNCHRONOUS:
            raise StoreError(
                f"synchronous must be one of {', '.join(SYNCHRONOUS)}, not {synchronous!r} "
                "(OFF is not offered: a signed-off decision must survive a crash)"
            )
        if busy_timeout_ms < 0 or wake_interval_s <= 0:
            raise StoreError("busy_timeout_ms must be >= 0 and wake_interval_s > 0")
        self.busy_timeout_ms = busy_timeout_ms
        self.url = f"sqlite:///{self.path}"
        self.origin = f"{os.getpid()}-{secrets.token_hex(4)}"
        self._waiters = Waiters()
        self._listeners = Listeners()
        self._doorbell = Doorbell(self.path)
        self._cache = DocCache()
        # a read-only connection whose PRAGMA data_version tells a cached read whether anyone
        # committed since this store's last COMMIT (opened by the writer, used by any thread)
        self._probe: sqlite3.Connection | None = None
        self._probe_lock = threading.Lock()
        self._writer = WriterThread(
            self._open_writer,
            self._write_audit_batch,
            name=f"signoff-sqlite-writer:{self.path}",
            errors=functools.partial(sqlite_errors, self.path),
            on_commit=self._doorbell.ring,
            on_begin=self._cache.check,
            on_committed=self._sync_probe,
        )
        self._reader: ThreadPoolExecutor | None = None
        self._reader_conn: sqlite3.Connection | None = None
        self._watcher = DataVersionWatcher(
            functools.partial(self._connect, query_only=True),
            self._on_data_change,
            self._watch_wanted,
            interval_s=wake_interval_s,
            name=f"signoff-sqlite-watcher:{self.path}",
            doorbell=self._doorbell,
            on_idle=self._cache.distrust,
        )
        self._audit_cursor: int | None = None
        self._state_lock = threading.Lock()
        self._started: Future[None] | None = None
        self._closed = False
        self._atexit: Callable[[], None] | None = None
        self._counters = {"cross_process_wakes": 0}
        self._quarantine_log = QuarantineLog()
        self.triggers_recreated: tuple[str, ...] = ()  # audit triggers the last open restored

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r}, synchronous={self.synchronous!r})"

    async def __aenter__(self) -> SQLiteStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---------------------------------------------------------------- lifecycle
    async def open(self) -> None:
        await self._ready()

    async def close(self) -> None:
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
        await asyncio.to_thread(self._shutdown)

    def _start(self) -> Future[None]:
        with self._state_lock:
            if self._closed:
                raise StoreError(f"SQLite store {self.path} is closed")
            if self._started is None:
                self._reader = ThreadPoolExecutor(1, thread_name_prefix="signoff-sqlite-reader")
                self._started = self._writer.start()
                self._started.add_done_callback(lambda _: self._maybe_watch())
                self._atexit = functools.partial(_close_at_exit, weakref.ref(self))
                atexit.register(self._atexit)
            return self._started

    async def _ready(self) -> None:
        started = self._start()
        if not started.done():
            await asyncio.wrap_future(started)
        started.result()

    def _shutdown(self) -> None:
        if self._atexit is not None:
            atexit.unregister(self._atexit)
        if self._started is None and self._writer.queued_audit:
            self._started = self._writer.start()  # events queued before open: write them
        self._watcher.stop()
        self._writer.stop()
        self._doorbell.close()  # after the writer: its last commits still ring the others
        with self._probe_lock:
            if self._probe is not None:
                self._probe.close()
                self._probe = None
        if self._reader is not None:
            self._reader.shutdown(wait=True)
        if self._reader_conn is not None:
            self._reader_conn.close()
        self._waiters.fail_all(StoreError(f"store {self.path} was closed while waiting"))
        if self._writer.lost_events:
            raise StoreError(
                f"SQLite store {self.path}: {self._writer.lost_events} queued audit events "
                "could not be written at close (see the log for the cause)"
            )

    def _connect(self, *, query_only: bool = False) -> sqlite3.Connection:
        with sqlite_errors(self.path, "opening the database"):
            return connect(
                self.path,
                busy_timeout_ms=self.busy_timeout_ms,
                synchronous=None if query_only else self.synchronous,
                query_only=query_only,
            )

    def _open_writer(self) -> sqlite3.Connection:
        conn = self._connect()
        try:
            with sqlite_errors(self.path, "preparing the schema"):
                self.triggers_recreated = prepare(conn, self.path, self.synchronous)[1]
        except BaseException:
            conn.close()
            raise
        return conn

    # ---------------------------------------------------------------- thread hops
    async def _write(self, job: Callable[[sqlite3.Connection], T]) -> T:
        await self._ready()
        return await self._writer.run(job)

    async def _read(self, job: Callable[[sqlite3.Connection], T], doing: str) -> T:
        await self._ready()
        assert self._reader is not None
        try:
            fut = self._reader.submit(self._run_read, job, doing)
        except RuntimeError:
            raise StoreError(f"SQLite store {self.path} is closed") from None
        return await asyncio.wrap_future(fut)

    def _run_read(self, job: Callable[[sqlite3.Connection], T], doing: str) -> T:
        with sqlite_errors(self.path, doing):
            if self._reader_conn is None:
                self._reader_conn = self._connect(query_only=True)
            return job(self._reader_conn)

    def _transaction(self, conn: sqlite3.Connection, doing: str, body: Callable[[], T]) -> T:
        """Run ``body`` as (part of) a writer job: inside the group's ``BEGIN IMMEDIATE``, in
        the job's savepoint (see :mod:`._sqlite_group`), so an error rolls back this job
        alone; sqlite3 errors become a :class:`StoreError` saying what was being done."""
        try:
            return body()
        except sqlite3.Error as exc:  # no generator context manager per job: see store_error
            raise store_error(self.path, doing, exc) from exc

    def _after_commit(
        self, request: ApprovalRequest, events: list[AuditEvent], doc: str, generation: int
    ) -> None:
        """From a writer job: once the change is committed, cache the document as written
        (``generation``: the cache's when the job read it) and wake waiters and listeners."""
        self._writer.after_commit(
            functools.partial(self._committed, request, events, doc, generation)
        )

    def _committed(
        self, request: ApprovalRequest, events: list[AuditEvent], doc: str, generation: int
    ) -> None:
        # ``request`` becomes the cached snapshot, shared read-only with readers and waiters
        # (as the MemoryStore's; the job's caller got it too, under the same contract) —
        # unless its text might not read back: then reads parse it (and quarantine it)
        snapshot = request if reads_back(doc) else None
        request_id, status = request.id, request.status
        self._cache.put(
            request_id, status, _new_cached(Cached, (request.version, doc, snapshot)), generation
        )
        if status in TERMINAL_STATUSES:  # request.terminal, without the property's call
            make = (
                functools.partial(_same, request)
                if snapshot is not None
                else functools.partial(_parse_own, request_id, doc)
            )
            for loop, fut in self._waiters.take(request_id):
                with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                    self._writer.call_in_loop(loop, functools.partial(settle_made, fut, make))
        if self._listeners:
            self._listeners.notify(request, listener_event([e.event for e in events], request))

    # ---------------------------------------------------------------- requests
    async def create_request(
        self,
        request: ApprovalRequest,
        events: list[AuditEvent],
        outbox: Sequence[OutboxItem] = (),
    ) -> tuple[ApprovalRequest, bool]:
        prints = fingerprints(request)

        def job(conn: sqlite3.Connection) -> tuple[Read, bool]:
            try:  # as _transaction does, inline: this job runs every cycle
                stored = rows.stored_calls(conn, request.thread, prints)
                existing = existing_request_id(request, prints, stored)
                if existing is not None:
                    found = rows.read_one(conn, existing)
                    if found is None:  # impossible while the foreign key holds
                        raise StoreError(f"call keys point to a missing request {existing}")
                    return self._settle_in_transaction(conn, *found), False
                generation = self._cache.generation
                doc = rows.insert_request(conn, request, prints)
                audit = unsealed_all(events)
                rows.append_sealed(conn, rows.seal_unsealed(conn, audit, self.origin))
                outbox_rows.insert(conn, outbox)
            except sqlite3.Error as exc:
                raise store_error(self.path, "storing a request", exc) from exc
            self._after_commit(request, events, doc, generation)
            return request, True

        stored, created = await self._write(job)
        if isinstance(stored, Unreadable):  # raised once its quarantine mark is committed
            raise self._unreadable(stored, "storing a request")
        return stored, created

    async def update_request(self, request_id: str, mutate: Mutation) -> Transition:
        """Run ``mutate`` on the writer thread, inside ``BEGIN IMMEDIATE``: keep it pure and quick
        (every other write in every process waits for it)."""

        def change(
            conn: sqlite3.Connection, current: ApprovalRequest, old_version: int
        ) -> Transition | None:
            """Apply ``mutate`` and write it; None when the row is not at ``old_version``."""
            transition = mutate(current)
            if not transition.changed:
                return transition  # (a released quarantine mark is committed)
            return self._write_change(conn, prepare_change(request_id, transition, old_version))

        def body(conn: sqlite3.Connection) -> Transition | Unreadable:
            cached = self._cache.take(request_id)  # back after this job's commit, if any
            if cached is not None:
                # a private copy of the shared snapshot (or a parse of our own text)
                current = (
                    working_copy(cached.request)
                    if cached.request is not None
                    else parse_doc(request_id, cached.doc)
                )
                if isinstance(current, ApprovalRequest):
                    done = change(conn, current, cached.version)
                    if done is not None:
                        if not done.changed:  # nothing written: the entry still holds
                            self._cache.put(
                                request_id, current.status, cached, self._cache.generation
                            )
                        return done
                log.warning("cached request %s was not current; reading it again", request_id)
            found = rows.read_one(conn, request_id)
            if found is None:
                raise NotFound(f"no approval request {request_id}")
            if isinstance(found[0], Unreadable) or found[1]:
                self._writer.savepoint()  # marking or releasing writes several statements
            read = self._settle_in_transaction(conn, *found)
            if isinstance(read, Unreadable):
                return read
            done = change(conn, read, read.version)
            if done is None:
                raise StoreError(f"request {request_id} changed during its own transaction")
            return done

        def job(conn: sqlite3.Connection) -> Transition | Unreadable:
            try:  # as _transaction does, inline: this job runs several times a cycle
                return body(conn)
            except sqlite3.Error as exc:
                raise store_error(self.path, "updating a request", exc) from exc

        transition: Transition | Unreadable = await self._write(SelfAtomic(job))
        if isinstance(transition, Unreadable):  # raised once its quarantine mark is committed
            raise self._unreadable(transition, "updating a request")
        return transition

    def _write_change(self, conn: sqlite3.Connection, prepared: Change) -> Transition | None:
        """On the writer: chain the audit rows and make the conditional write of a change;
        None when the row is not at the version it started from.

        A :class:`SelfAtomic` job's part: everything that can fail comes before the one
        UPDATE, unless grants or outbox rows make it several statements (then in a savepoint
        of its own)."""
        generation = self._cache.generation
        transition = prepared.transition
        sealed = rows.seal_unsealed(conn, prepared.audit, self.origin)
        if transition.grants or transition.outbox:
            self._writer.savepoint()
        if conn.execute(rows.UPDATE_DOC, prepared.params).rowcount != 1:
            return None
        grant_rows.insert(conn, transition.grants)
        outbox_rows.insert(conn, transition.outbox)
        rows.append_sealed(conn, sealed)  # a list append: cannot fail after the UPDATE
        self._after_commit(transition.request, transition.events, prepared.doc, generation)
        return transition

    def _probe_version(self, *, open_it: bool = False) -> int | None:
        with self._probe_lock:
            try:
                if self._probe is None:
                    if not open_it or self._closed:
                        return None
                    probe = self._connect(query_only=True)
                    # read on event loops: never wait for a lock there (busy: the database)
                    probe.execute("PRAGMA busy_timeout = 0")
                    self._probe = probe
                return int(self._probe.execute("PRAGMA data_version").fetchone()[0])
            except (sqlite3.Error, StoreError):
                return None  # cached reads wait for the next COMMIT to sync again

    def _sync_probe(self) -> None:
        """On the writer, right after a COMMIT: what the probe sees now is this store's."""
        self._cache.synced(self._probe_version(open_it=True))

    def _cached(self, request_id: str) -> ApprovalRequest | None:
        """A read served on the caller's loop from the document cache, when it is current."""
        if self._closed or not self._cache.trusted:
            return None
        entry = self._cache.read(request_id, self._probe_version())
        if entry is None:
            return None
        if entry.request is not None:
            return entry.request  # the shared snapshot: read-only, as the MemoryStore's
        parsed = parse_doc(request_id, entry.doc)
        if not isinstance(parsed, ApprovalRequest):
            return None
        self._cache.remember(request_id, entry, parsed)
        return parsed

    async def get_request(self, request_id: str) -> ApprovalRequest | None:
        cached = self._cached(request_id)
        if cached is not None:  # see _sqlite_cache for when that is
            return cached
        found = await self._read(lambda c: rows.read_one(c, request_id), "reading a request")
        return await self._settle_read(found, "reading a request")

    async def find_request_by_call(self, thread: str, tool_call_id: str) -> ApprovalRequest | None:
        columns = ", ".join(f"r.{c.strip()}" for c in rows.ROW.split(","))

        def job(conn: sqlite3.Connection) -> tuple[Read, bool] | None:
            row = conn.execute(
                f"SELECT {columns} FROM call_keys k JOIN requests r ON r.id = k.request_id "
                "WHERE k.thread = ? AND k.tool_call_id = ?",
                (thread, tool_call_id),
            ).fetchone()
            return to_request(row) if row else None

        found = await self._read(job, "finding a request by call")
        return await self._settle_read(found, "finding a request by call")

    async def list_requests(
        self,
        *,
        status: str | None = None,
        thread: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[ApprovalRequest]:
        good, bad = await self._read(
            lambda c: rows.select_requests(
                c, status=status, thread=thread, kind=kind, limit=limit, offset=offset
            ),
            "listing requests",
        )
        if bad:
            await self._quarantine(bad, "listing requests")
        return good

    async def due_requests(self, now: datetime, limit: int = 100) -> list[str]:
        """Due, readable rows: each due row is parsed here, and one that fails is quarantined
        and left out — so the sweeper (and a start-up sweep) never trips over it."""

        def job(conn: sqlite3.Connection) -> tuple[list[str], list[Unreadable]]:
            good, bad = split(conn.execute(rows.DUE_SQL, (rows.epoch(now), limit)))
            return [r.id for r in good], bad

        for _ in range(10):  # a page of nothing but bad rows: look again once they are marked
            ids, bad = await self._read(job, "finding due requests")
            marked = bool(bad) and await self._quarantine(bad, "finding due requests")
            if ids or not marked:
                return ids
        return []

    async def next_due_at(self) -> datetime | None:
        def job(conn: sqlite3.Connection) -> datetime | None:
            value = conn.execute(rows.NEXT_DUE_SQL).fetchone()[0]
            return rows.from_epoch(value) if value is not None else None

        return await self._read(job, "finding the next deadline")

    # ---------------------------------------------------------------- grants
    async def create_grant(self, grant: Grant, events: list[AuditEvent]) -> Grant:
        def job(conn: sqlite3.Connection) -> Grant:
            return self._transaction(
                conn,
                "storing a grant",
                lambda: grant_rows.create(conn, grant, events, self.origin),
            )

        return await self._write(job)

    async def revoke_grant(
        self,
        grant_id: str,
        *,
        by: str,
        reason: str | None,
        now: datetime,
        events: list[AuditEvent],
    ) -> Grant:
        def job(conn: sqlite3.Connection) -> Grant:
            return self._transaction(
                conn,
                "revoking a grant",
                lambda: grant_rows.revoke(
                    conn, grant_id, by=by, reason=reason, now=now, events=events, origin=self.origin
                ),
            )

        return await self._write(job)

    async def get_grant(self, grant_id: str) -> Grant | None:
        return await self._read(lambda c: grant_rows.get(c, grant_id), "reading a grant")

    async def list_grants(
        self, *, active_at: datetime | None = None, limit: int = 1000
    ) -> list[Grant]:
        return await self._read(lambda c: grant_rows.select(c, active_at, limit), "listing grants")

    async def grants_version(self) -> int:
        return await self._read(grant_rows.version, "reading the grants version")

    async def redaction_salt(self) -> bytes:
        def read(conn: sqlite3.Connection) -> bytes:
            row = conn.execute(
                "SELECT value FROM store_secrets WHERE name = 'redaction_salt'"
            ).fetchone()
            if row is None:
                raise StoreError(f"SQLite store {self.path} has no redaction salt")
            return bytes.fromhex(str(row[0]))

        return await self._read(read, "reading the redaction salt")

    async def note_expired_grants(self, now: datetime) -> list[Grant]:
        def job(conn: sqlite3.Connection) -> list[Grant]:
            return self._transaction(
                conn,
                "noting expired grants",
                lambda: grant_rows.note_expired(conn, now, self.origin),
            )

        return await self._write(job)

    # ---------------------------------------------------------------- quarantine
    async def count_requests(self) -> RequestCounts:
        def job(conn: sqlite3.Connection) -> RequestCounts:
            pending = conn.execute(rows.PENDING_COUNT_SQL).fetchone()[0]
            quarantined = conn.execute(rows.QUARANTINED_COUNT_SQL).fetchone()[0]
            return RequestCounts(int(pending), int(quarantined))

        return await self._read(job, "counting requests")

    async def quarantined_requests(self, limit: int = 100) -> list[QuarantinedRequest]:
        return await self._read(lambda c: rows.quarantined(c, limit), "listing quarantined rows")

    async def cancel_quarantined(
        self, request_id: str, *, actor: str, reason: str | None = None
    ) -> QuarantinedRequest:
        def job(conn: sqlite3.Connection) -> QuarantinedRequest:
            return self._transaction(
                conn,
                "cancelling a quarantined request",
                lambda: self._cache_out(
                    request_id,
                    rows.cancel_quarantined(conn, request_id, actor, reason, self.origin),
                ),
            )

        closed = await self._write(job)
        self._waiters.fail(
            closed.id, RequestQuarantined(closed.id, closed.reason, status="cancelled")
        )
        return closed

    def _cache_out(self, request_id: str, result: T) -> T:
        self._cache.discard(request_id)
        return result

    def _settle_in_transaction(self, conn: sqlite3.Connection, value: Read, marked: bool) -> Read:
        """Inside a write transaction: mark an unreadable row; release a repaired one."""
        if isinstance(value, Unreadable) or marked:
            self._cache.discard(value.id)
        if isinstance(value, Unreadable):
            rows.mark_quarantined(conn, value, self.origin, utcnow())
        elif marked and rows.release_quarantine(conn, value.id):
            self._quarantine_log.released(value.id)
        return value

    def _unreadable(self, bad: Unreadable, where: str) -> RequestQuarantined:
        """Log once, tell the row's waiters; the error for the caller to raise."""
        self._quarantine_log.found(bad, where)
        error = bad.error()
        self._waiters.fail(bad.id, error)
        return error

    async def _settle_read(
        self, found: tuple[Read, bool] | None, where: str
    ) -> ApprovalRequest | None:
        """A read by id: the request, or RequestQuarantined (marking the row first)."""
        if found is None:
            return None
        value, marked = found
        if isinstance(value, Unreadable):
            await self._quarantine([value], where)
            raise value.error()
        if marked:
            try:  # best effort, like the mark: a read-only file can still be read
                await self._write(
                    lambda conn: self._transaction(
                        conn,
                        "releasing a quarantined request",
                        lambda: self._settle_in_transaction(conn, value, marked),
                    )
                )
            except StoreError as exc:
                log.warning("could not release quarantined request %s: %s", value.id, exc)
        return value

    async def _quarantine(self, bad: list[Unreadable], where: str) -> bool:
        """Mark rows found unreadable by a read; best effort (a read-only file can still be
        read: the rows are then skipped without a mark). True when the marks were written."""
        for row in bad:
            self._unreadable(row, where)
        todo = [row for row in bad if not row.marked]
        if not todo:
            return False

        def body(conn: sqlite3.Connection) -> None:
            for row in todo:
                self._cache.discard(row.id)
                rows.mark_quarantined(conn, row, self.origin, utcnow())

        try:
            await self._write(
                lambda conn: self._transaction(conn, "quarantining requests", lambda: body(conn))
            )
        except Exception as exc:
            log.warning("could not mark unreadable requests as quarantined: %s", exc)
            return False
        return True

    # ---------------------------------------------------------------- outbox
    async def enqueue_outbox(self, items: Sequence[OutboxItem]) -> int:
        if not items:
            return 0
        return await self._write(
            lambda conn: self._transaction(
                conn, "queueing notifications", lambda: outbox_rows.insert(conn, items)
            )
        )

    async def claim_outbox(
        self,
        now: datetime,
        *,
        limit: int = 50,
        lease_s: float = 60.0,
        channels: Collection[str] | None = None,
    ) -> list[OutboxItem]:
        return await self._write(
            lambda conn: self._transaction(
                conn,
                "claiming notifications",
                lambda: outbox_rows.claim(conn, now, limit, lease_s, channels),
            )
        )

    async def complete_outbox(
        self,
        item_id: str,
        *,
        status: OutboxOutcome = "sent",
        ref: dict[str, Any] | None = None,
        error: str | None = None,
        audit: Sequence[AuditEvent] = (),
    ) -> None:
        def body(conn: sqlite3.Connection) -> None:
            outbox_rows.complete(conn, item_id, status, ref, error)
            if audit:  # in the same savepoint: both or neither
                rows.insert_audit(conn, list(audit), self.origin)

        await self._write(
            lambda conn: self._transaction(conn, "completing a notification", lambda: body(conn))
        )

    async def retry_outbox(self, item_id: str, *, next_at: datetime, error: str) -> None:
        await self._write(
            lambda conn: self._transaction(
                conn,
                "rescheduling a notification",
                lambda: outbox_rows.retry(conn, item_id, next_at, error),
            )
        )

    async def cancel_outbox_for(
        self, request_id: str, kinds: Collection[str] = PROMPT_KINDS
    ) -> int:
        return await self._write(
            lambda conn: self._transaction(
                conn,
                "cancelling notifications",
                lambda: outbox_rows.cancel_for(conn, request_id, kinds),
            )
        )

    async def outbox_for(self, request_id: str) -> list[OutboxItem]:
        return await self._read(
            lambda c: outbox_rows.for_request(c, request_id), "reading notifications"
        )

    async def next_outbox_at(self, channels: Collection[str] | None = None) -> datetime | None:
        return await self._read(
            lambda c: outbox_rows.next_at(c, channels), "finding the next notification"
        )

    # ---------------------------------------------------------------- waiting
    async def wait(self, request_id: str, timeout: float | None = None) -> ApprovalRequest:
        async def read(rid: str) -> ApprovalRequest | None:
            self._watcher.ensure_running()  # after registering: its first look closes the gap
            return await self.get_request(rid)

        await self._ready()
        return await wait_until_terminal(self._waiters, read, request_id, timeout)

    def add_listener(self, listener: ChangeListener) -> Callable[[], None]:
        remove = self._listeners.add(listener)
        self._maybe_watch()
        return remove

    def _watch_wanted(self) -> bool:
        return len(self._waiters) > 0 or bool(self._listeners)

    def _maybe_watch(self) -> None:
        started = self._started
        ready = started is not None and started.done() and not started.exception()
        if ready and self._watch_wanted():
            self._watcher.ensure_running()

    def _on_data_change(self, conn: sqlite3.Connection, first: bool) -> None:
        """Another connection committed: wake waiters whose request is now terminal."""
        if first and self._watcher.doorbell_works:
            self._cache.trust()  # from now on every foreign commit rings us: see _sqlite_cache
        else:
            self._cache.drop_all()
        terminal, unreadable = rows.terminal_among(conn, self._waiters.ids())
        for request in terminal:
            self._counters["cross_process_wakes"] += self._waiters.wake(request)
        for bad in unreadable:
            self._unreadable(bad, "waking waiters")
        if self._listeners:
            self._tell_listeners_about_others(conn, first)
        else:
            self._audit_cursor = None

    def _tell_listeners_about_others(self, conn: sqlite3.Connection, first: bool) -> None:
        """Best effort: listeners also hear of changes other processes made (once each)."""
        top = int(conn.execute("SELECT coalesce(max(seq), 0) FROM audit").fetchone()[0])
        after, self._audit_cursor = self._audit_cursor, top
        if first or after is None or top <= after:
            return
        changes = rows.foreign_changes(conn, after, top, self.origin)
        if not changes:
            return
        docs = rows.docs_by_id(conn, list(changes))
        for request_id, event in changes.items():
            if request_id in docs:
                self._listeners.notify(docs[request_id], event)

    # ---------------------------------------------------------------- audit
    def audit_nowait(self, event: AuditEvent) -> None:
        if self._started is None:
            # A gate that only allows/denies never awaits the store: start the writer here,
            # or its batched audit rows would wait in memory until close().
            self._start()
        self._writer.queue_audit(event)

    def _write_audit_batch(self, conn: sqlite3.Connection, events: list[AuditEvent]) -> None:
        self._transaction(
            conn, "writing audit events", lambda: rows.insert_audit(conn, events, self.origin)
        )

    async def append_audit(self, events: list[AuditEvent]) -> None:
        if events:
            await self._write(lambda conn: self._write_audit_batch(conn, events))

    async def flush_audit(self) -> None:
        await self._ready()
        await asyncio.wrap_future(self._writer.flush())

    def audit_failure(self) -> str | None:
        return self._writer.audit_error

    async def check_writable(self) -> None:
        """Rewrite the header's user_version with its own value: a real write, no change."""

        def probe(conn: sqlite3.Connection) -> None:  # committed with its group
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            conn.execute(f"PRAGMA user_version = {int(version)}")

        try:
            await self._write(probe)
        except (sqlite3.Error, StoreError) as exc:
            raise StoreError(
                f"the SQLite store {self.path} is not writable ({exc}); give this process "
                f"write access to the file and its directory (WAL mode also writes "
                f"{os.path.basename(self.path)}-wal and -shm there), or point store: at a "
                "writable path"
            ) from exc

    async def read_audit(self, query: AuditQuery = AuditQuery()) -> list[AuditRecord]:
        return await self._read(lambda c: rows.select_audit(c, query), "reading the audit log")

    async def audit_head(self) -> tuple[int, str]:
        def job(conn: sqlite3.Connection) -> tuple[int, str]:
            row = conn.execute("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
            return (int(row[0]), str(row[1])) if row else (0, GENESIS_HASH)

        return await self._read(job, "reading the audit log's head")

    async def verify_audit(self) -> AuditVerification:
        """Walk the chain in chunks on a connection of its own: constant memory, no blocking."""
        await self._ready()
        return await asyncio.to_thread(self._verify)

    def _verify(self) -> AuditVerification:
        verifier = ChainVerifier()
        conn = self._connect(query_only=True)
        try:
            with sqlite_errors(self.path, "verifying the audit log"):
                after = 0
                while chunk := rows.audit_chunk(conn, after, _VERIFY_CHUNK):
                    if not all(verifier.feed(record) for record in chunk):
                        break
                    after = chunk[-1].seq
        finally:
            conn.close()
        return verifier.result()

    async def count_events(
        self,
        event: str,
        *,
        tool: str,
        since: datetime,
        by: str | None = None,
        value: str | None = None,
    ) -> int:
        return await self._read(
            lambda c: rows.count_audit(c, event, tool, since, by, value), "counting audit events"
        )

    async def integrity_check(self) -> str:
        """``PRAGMA integrity_check``: ``"ok"`` or SQLite's list of problems (slow on big files)."""

        def job(conn: sqlite3.Connection) -> str:
            return "\n".join(str(r[0]) for r in conn.execute("PRAGMA integrity_check"))

        return await self._read(job, "checking integrity")

    async def check(self) -> StoreCheck:
        """``signoff db check``: integrity, schema version, audit triggers, quarantined rows —
        on a read-only connection of its own, so it never migrates or repairs anything."""
        return await asyncio.to_thread(check_file, self.path, self.url, self.busy_timeout_ms)

    def stats(self) -> dict[str, Any]:
        writer = self._writer
        groups, jobs = writer.groups, writer.group_jobs
        return {
            "backend": "sqlite",
            "path": self.path,
            "synchronous": self.synchronous,
            # one transaction per group commit; writer time includes its COMMIT (the fsync)
            "transactions": groups,
            "jobs": jobs,
            "mean_transaction_ms": round(1000 * writer.busy_s / groups, 3) if groups else None,
            "writer_ms_per_job": round(1000 * writer.busy_s / jobs, 3) if jobs else None,
            "writer_cpu_ms_per_job": round(1000 * writer.busy_cpu_s / jobs, 3) if jobs else None,
            "mean_group_size": round(jobs / groups, 2) if groups else None,
            # the totals behind the means, for figures over a window (differences)
            "writer_busy_s": writer.busy_s,
            "writer_cpu_s": writer.busy_cpu_s,
            "audit_queued": self._writer.queued_audit,
            "audit_batches": self._writer.batches,
            "audit_batched_events": self._writer.batched_events,
            "waiters": len(self._waiters),
            "watcher_running": self._watcher.running,
            "data_version_checks": self._watcher.checks,
            "doorbell": self._watcher.doorbell_works,
            "doorbell_wakes": self._watcher.rung,
            "doorbell_rings": self._doorbell.rings,
            "cross_process_wakes": self._counters["cross_process_wakes"],
            "cache_entries": len(self._cache),
            "cache_hits": self._cache.hits,
            "cache_misses": self._cache.misses,
            "cache_reads_trusted": self._cache.trusted,
            "cache_drops": self._cache.drops,  # whole-cache drops (another commit, a restart)
        }


# Cached(...) without the named tuple's Python-level __new__ (once per write, on the writer)
_new_cached: Callable[[type[Cached], tuple[Any, ...]], Cached] = tuple.__new__


def _same(request: ApprovalRequest) -> ApprovalRequest:
    """A woken waiter's result: the committed snapshot itself (shared, read-only)."""
    return request


def _parse_own(request_id: str, doc: str) -> ApprovalRequest:
    """A document this store wrote, parsed for a woken waiter (one that may not read back
    raises, as a read of its row would)."""
    parsed = parse_doc(request_id, doc)
    if isinstance(parsed, str):
        raise StoreError(f"request {request_id} as written cannot be read back: {parsed}")
    return parsed


def _close_at_exit(ref: weakref.ReferenceType[SQLiteStore]) -> None:
    """Flush queued audit events of a store its owner forgot to close."""
    store = ref()
    if store is None:
        return
    with store._state_lock:
        if store._closed:
            return
        store._closed = True
    try:
        store._shutdown()
    except Exception:
        log.exception("closing the SQLite store at exit failed")
