"""``PostgresStore``: approvals for any number of ``signoff serve`` replicas on one database.

Same contract as every store (:mod:`signoff.store.base`), built for several processes:

* **One statement per change.** Create + audit + NOTIFY is one statement; a decision is a
  read, the shared state machine in Python, then one conditional statement writing the row,
  grants, audit and NOTIFY only if the row's version still matched — first decision wins
  (:mod:`._pg_sql`). The audit hash chain is extended inside that statement
  (:mod:`._pg_schema`), so its lock is held only until COMMIT.
* **Wake-up across replicas.** One LISTEN connection per store fans notifications out to
  local waiters and listeners; the row is the truth, so waiters re-read after subscribing,
  after a reconnect and on a safety interval (:mod:`._pg_listen`).
* **Sweeper without a leader.** ``due_requests`` leases due rows with ``FOR UPDATE SKIP
  LOCKED``, so every replica's sweeper takes different requests; a lease ends on the
  database clock, and the conditional update makes a double expiry impossible anyway.
* **A shared notification outbox.** A request's first messages are written in its create
  statement; every replica's delivery worker claims due rows with ``FOR UPDATE SKIP
  LOCKED`` under a lease, so each message is sent by one replica (:mod:`._pg_outbox`).
* **Fail closed, then recover.** An unreachable database is a :class:`StoreError` within
  ``timeout_s``; the pool and the listener reconnect by themselves (:mod:`._pg_conn`).

A statement runs on its caller's event loop, on a connection borrowed from a pool any loop may
borrow from (:mod:`._pg_conn`): no hop to another thread. The store's own loop thread
(:mod:`signoff._loopthread`) keeps what lives on: the LISTEN connection, the audit batcher, and
the calls of other loop threads (the gate's portal), which stop without cancelling their
tasks — a write must not be left half-way on one.
URL: ``postgresql://user@host/db?schema=signoff&pool_max=8`` (see
:func:`signoff.store.open_store`).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import logging
import os
import re
import secrets
import socket
import threading
import weakref
from collections.abc import Awaitable, Callable, Collection, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from signoff._loopthread import LoopThread, on_a_loop_thread
from signoff.model import (
    ApprovalRequest,
    AuditEvent,
    AuditRecord,
    AuditVerification,
    IdempotencyConflict,
    NotFound,
    RequestQuarantined,
    StoreError,
    Transition,
    utcnow,
)
from signoff.model.grants import Grant
from signoff.store import _grants, _pg_sql
from signoff.store._idempotency import StoredCall, existing_request_id, fingerprints
from signoff.store._pg_audit import entries_json, to_record
from signoff.store._pg_batch import AuditBatcher
from signoff.store._pg_check import check_schema
from signoff.store._pg_conn import Conn, Connections, connection_lost, redact
from signoff.store._pg_grants import GrantStatements
from signoff.store._pg_grants import rows_json as grants_json
from signoff.store._pg_listen import Listener
from signoff.store._pg_outbox import OutboxStatements, channels_param, claim_params, ref_json
from signoff.store._pg_outbox import rows_json as outbox_json
from signoff.store._pg_outbox import to_item as outbox_item
from signoff.store._pg_schema import (
    SCHEMA_VERSION,
    audit_trigger_problems,
    current_version,
    grant,
    migrate,
    repair_audit_triggers,
)
from signoff.store._pg_slots import InFlight, retrieve
from signoff.store._pg_sql import Statements
from signoff.store._pg_wake import Wakeups
from signoff.store._quarantine import (
    QuarantineLog,
    Unreadable,
    cancelled_event,
    parse_doc,
    split,
    to_request,
)
from signoff.store._waiting import wait_until_terminal
from signoff.store._working import working_copy
from signoff.store._written import WrittenDocs
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
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_MAX_ATTEMPTS = 100  # optimistic retries of one update; each lost race means another won
_VERIFY_CHUNK = 2000


class PostgresStore:
    """Approval requests and the audit log in PostgreSQL, shared by many processes."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "signoff",
        pool_min: int = 1,
        pool_max: int = 8,
        timeout_s: float = 5.0,
        recheck_s: float = 30.0,
        claim_s: float = 10.0,
        direct_host: str | None = None,
        direct_port: int | None = None,
        url: str | None = None,
    ) -> None:
        if not _SCHEMA_NAME.fullmatch(schema):
            raise StoreError(
                f"schema {schema!r} is not a plain lower-case identifier (a-z, 0-9, _)"
            )
        if not 1 <= pool_min <= pool_max:
            raise StoreError(f"need 1 <= pool_min <= pool_max, got {pool_min} and {pool_max}")
        if min(timeout_s, recheck_s, claim_s) <= 0:
            raise StoreError("timeout_s, recheck_s and claim_s must be positive")
        self.dsn = dsn
        self.url = redact(url or dsn)  # logged and shown: never with the password
        self.schema = schema
        self.channel = f"signoff:{schema}"
        self.pool_min, self.pool_max = pool_min, pool_max
        self.timeout_s, self.recheck_s, self.claim_s = timeout_s, recheck_s, claim_s
        self.direct = {
            key: str(value)
            for key, value in (("host", direct_host), ("port", direct_port))
            if value is not None
        }
        self.origin = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        self._sql = Statements.for_schema(schema)
        self._outbox = OutboxStatements.for_schema(schema)
        self._grant_sql = GrantStatements.for_schema(schema)
        self._loop = LoopThread(f"signoff-postgres:{schema}")
        self._connections: Connections | None = None
        self._listener: Listener | None = None
        self._wake = Wakeups(self.origin, self._sql, self._conn)
        self._batcher = AuditBatcher(self._write_audit)
        self._state_lock = threading.Lock()
        self._opening: concurrent.futures.Future[None] | None = None
        self._closed = False
        # Writes in flight on any loop: close() lets them finish (their caller may have given
        # up; see _call's shield) before the pool goes, so none is left open mid-transaction
        # — idle in transaction, holding its row locks until exit.
        self._writing = InFlight()
        self._atexit: Callable[[], None] | None = None
        self._clock_offset = timedelta(0)
        self.migrations_applied: list[int] = []
        self._retries = 0
        self._quarantine_log = QuarantineLog()
        self._written = WrittenDocs()
        self._unread_updates = 0

    def __repr__(self) -> str:
        return f"PostgresStore({redact(self.dsn)!r}, schema={self.schema!r})"

    async def __aenter__(self) -> PostgresStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---------------------------------------------------------------- lifecycle
    async def open(self) -> None:
        await self._ready()

    def _start(self) -> concurrent.futures.Future[None]:
        with self._state_lock:
            if self._closed:
                raise StoreError(f"PostgreSQL store {redact(self.dsn)} is closed")
            opening = self._opening
            if opening is None or (opening.done() and opening.exception() is not None):
                opening = asyncio.run_coroutine_threadsafe(self._open_on_loop(), self._loop.loop)
                self._opening = opening
            return opening

    async def _ready(self) -> None:
        opening = self._start()
        if not opening.done():
            await asyncio.wrap_future(opening)
        opening.result()

    async def _open_on_loop(self) -> None:
        """Connect, migrate (under an advisory lock), then start the pool and the batcher."""
        connections = Connections(
            self.dsn,
            min_size=self.pool_min,
            max_size=self.pool_max,
            timeout_s=self.timeout_s,
            direct=self.direct,
        )
        first = await connections.dedicated(direct=True)  # auth/DNS errors surface here
        try:
            with connections.errors("migrating the schema"):
                self.migrations_applied = await migrate(first, self.schema)
                self._clock_offset = await _clock_offset(first)
                guards = await audit_trigger_problems(first, self.schema)
            await connections.open(first)
        except BaseException:
            await first.close()
            await connections.close()
            raise
        self._connections = connections
        self._listener = Listener(
            connections,
            self.channel,
            on_note=self._wake.on_note,
            on_connected=self._wake.on_listening,
            on_recheck=self._wake.recheck,
            recheck_s=self.recheck_s,
        )
        self._batcher.start()
        if self._wake.listeners:
            self._listener.start()
        with self._state_lock:
            if self._atexit is None:
                self._atexit = functools.partial(_close_at_exit, weakref.ref(self))
                atexit.register(self._atexit)
        if guards:  # an app role cannot recreate them; the owner's `db upgrade` does
            log.warning(
                "the audit log's append-only triggers are not in force (%s): run "
                "`signoff db upgrade` as the schema's owner, then `signoff audit verify`",
                ", ".join(guards),
                extra={"schema": self.schema},
            )
        if abs(self._clock_offset.total_seconds()) > 1.0:
            log.warning(
                "this machine's clock differs from the database's",
                extra={"offset_s": self._clock_offset.total_seconds()},
            )

    async def close(self) -> None:
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            opening = self._opening
        await asyncio.to_thread(self._shutdown, opening)

    def _shutdown(self, opening: concurrent.futures.Future[None] | None) -> None:
        if self._atexit is not None:
            atexit.unregister(self._atexit)
        if opening is None and len(self._batcher):  # events queued before open: write them
            opening = asyncio.run_coroutine_threadsafe(self._open_on_loop(), self._loop.loop)
        lost = 0
        if opening is not None:
            try:
                opening.result(timeout=self.timeout_s * 3)
            except Exception as exc:
                log.warning("the PostgreSQL store never opened", extra={"error": str(exc)})
            if not self._writing.wait_idle(self.timeout_s):
                log.warning(
                    "closing the PostgreSQL store with writes still under way",
                    extra={"writes": len(self._writing)},
                )
            lost = self._loop.run(self._close_on_loop(), timeout=self.timeout_s * 6)
        self._loop.stop()
        closed = StoreError(f"store {redact(self.dsn)} was closed while waiting")
        self._wake.waiters.fail_all(closed)
        if lost:
            raise StoreError(
                f"PostgreSQL store {redact(self.dsn)}: {lost} queued audit events could not "
                "be written at close (see the log for the cause)"
            )

    async def _close_on_loop(self) -> int:
        """Stop the workers, write what is queued; returns how many events could not be."""
        await self._batcher.stop()
        if self._connections is not None:
            try:
                await self._batcher.flush()
            except Exception:
                log.exception("audit events queued at close were not written")
        if self._listener is not None:
            await self._listener.stop()
        # Calls from other loop threads still running here (a sweeper's read being cancelled:
        # psycopg cancels its query on the server first) end before the pool and the loop go.
        others = asyncio.all_tasks() - {asyncio.current_task()}
        if others:
            await asyncio.wait(others, timeout=self.timeout_s)
        if self._connections is not None:
            await self._connections.close()
        return len(self._batcher)

    async def _call(
        self, job: Callable[[], Coroutine[Any, Any, T]], *, write: bool = False, home: bool = False
    ) -> T:
        """Open if needed, then run ``job()`` — a write to completion, even when its caller is
        cancelled (shielded, and known to :meth:`close` until it ends).

        On the caller's loop; on the store's own loop for ``home`` jobs (what is bound to that
        loop: the listener, the batcher) and for callers on another loop thread (see the
        module docstring)."""
        await self._ready()
        if home or on_a_loop_thread():
            if not write:
                return await self._loop.call(job())
            self._writing.enter()
            return await self._loop.call(self._tracked(job()), shield=True)
        if not write:
            return await job()
        self._writing.enter()
        task = asyncio.ensure_future(self._tracked(job()))
        task.add_done_callback(retrieve)
        return await asyncio.shield(task)

    async def _tracked(self, write: Coroutine[Any, Any, T]) -> T:
        """Run a write counted in :attr:`_writing` (entered by the caller) until it ends."""
        try:
            return await write
        finally:
            self._writing.exit()

    def _conn(self, doing: str, *, write: bool = False) -> AbstractAsyncContextManager[Conn]:
        if self._connections is None:
            raise StoreError(f"PostgreSQL store {redact(self.dsn)} is not open")
        return self._connections.connection(doing, write=write)

    # ---------------------------------------------------------------- requests
    async def create_request(
        self,
        request: ApprovalRequest,
        events: list[AuditEvent],
        outbox: Sequence[OutboxItem] = (),
    ) -> tuple[ApprovalRequest, bool]:
        prints = fingerprints(request)
        params = _pg_sql.create_params(request, events, prints, self.origin, self.channel, outbox)

        async def job() -> tuple[ApprovalRequest, bool]:
            async with self._conn("storing a request", write=True) as conn:
                try:
                    row = await (await conn.execute(self._sql.create, params)).fetchone()
                except psycopg.errors.UniqueViolation as exc:
                    if exc.diag.constraint_name != "call_keys_pkey":
                        raise
                    row = None  # some call is stored already: find out which request has it
                if row is None:
                    return await self._existing(conn, request, prints), False
            readable = parse_doc(request.id, params["doc"])  # what the next read would see
            if isinstance(readable, ApprovalRequest):
                self._written.keep(readable)
            self._wake.committed(request, events)
            return request, True

        return await self._call(job, write=True)

    async def _existing(
        self, conn: Conn, request: ApprovalRequest, prints: dict[str, str]
    ) -> ApprovalRequest:
        cur = await conn.execute(self._sql.stored_calls, (request.thread, list(prints)))
        stored = {cid: StoredCall(rid, fp) for cid, rid, fp in await cur.fetchall()}
        existing = existing_request_id(request, prints, stored)
        if existing is None:
            raise IdempotencyConflict(
                f"request id {request.id} is already used by other calls; use a new request id"
            )
        found = await self._read(conn, existing, "storing a request")
        if found is None:  # impossible while the foreign key holds
            raise StoreError(f"call keys point to a missing request {existing}")
        return found[0]

    async def update_request(self, request_id: str, mutate: Mutation) -> Transition:
        """Read, run ``mutate`` (keep it pure: it may run again if another writer won the
        race), then write only if the row is still the version that was read."""

        async def job() -> Transition:
            async with self._conn("updating a request") as conn:
                written = self._written.take(request_id)
                if written is not None:  # this process wrote it last: try without a read
                    transition = await self._write_unread(conn, request_id, mutate, written)
                    if transition is not None:
                        return transition
                for _ in range(_MAX_ATTEMPTS):
                    found = await self._read(conn, request_id, "updating a request")
                    if found is None:
                        raise NotFound(f"no approval request {request_id}")
                    current, old_version = found
                    transition = mutate(current)
                    if not transition.changed:
                        return transition
                    if await self._write(conn, request_id, transition, old_version):
                        self._committed(transition)
                        return transition
                    self._retries += 1
            raise StoreError(
                f"request {request_id} changed {_MAX_ATTEMPTS} times while being updated; try again"
            )

        return await self._call(job, write=True)

    async def _write_unread(
        self, conn: Conn, request_id: str, mutate: Mutation, written: ApprovalRequest
    ) -> Transition | None:
        """``mutate`` the document this process wrote last and write it if the row is still
        that version; None when the caller must read the row (it changed since, or the
        mutation refused or changed nothing — a newer row may allow it)."""
        old_version = written.version
        try:
            transition = mutate(working_copy(written))
        except Exception:  # decided again on the row as stored, which raises if it must
            return None
        if not transition.changed:
            return None
        if not await self._write(conn, request_id, transition, old_version):
            return None
        self._unread_updates += 1
        self._committed(transition)
        return transition

    def _committed(self, transition: Transition) -> None:
        # the request the update returns, kept and handed to waiters as a read-only snapshot
        self._written.keep(transition.request)
        self._wake.committed(transition.request, transition.events)

    async def _read(
        self, conn: Conn, request_id: str, where: str
    ) -> tuple[ApprovalRequest, int] | None:
        """The row and its version; an unreadable row is quarantined and raises
        :class:`RequestQuarantined`; a quarantined row that parses again is released."""
        row = await (await conn.execute(self._sql.read_doc, (request_id,))).fetchone()
        if row is None:
            return None
        return await self._settle(conn, row, where), int(row[6])

    async def _settle(self, conn: Conn, row: tuple[Any, ...], where: str) -> ApprovalRequest:
        value, marked = to_request(row)
        if isinstance(value, Unreadable):
            await self._quarantine(conn, [value], where)
            raise value.error()
        if marked and (await conn.execute(self._sql.release, (value.id,))).rowcount:
            self._quarantine_log.released(value.id)
        return value

    async def _quarantine(self, conn: Conn, bad: list[Unreadable], where: str) -> bool:
        """Mark rows a read found unreadable (best effort; logged once, waiters told)."""
        for row in bad:
            self._quarantine_log.found(row, where)
            self._wake.waiters.fail(row.id, row.error())
        todo = [row for row in bad if not row.marked]
        try:
            for row in todo:
                params = _pg_sql.quarantine_params(row, self.origin, self.channel)
                await conn.execute(self._sql.quarantine, params)
        except psycopg.Error as exc:
            log.warning("could not mark unreadable requests as quarantined: %s", exc)
            return False
        return bool(todo)

    async def _write(
        self, conn: Conn, request_id: str, transition: Transition, old_version: int
    ) -> bool:
        new = transition.request
        if new.id != request_id:
            raise StoreError(f"a mutation turned request {request_id} into {new.id}")
        if new.version <= old_version:
            new.version = old_version + 1
        params = _pg_sql.update_params(transition, old_version, self.origin, self.channel)
        assert self._connections is not None
        with self._connections.errors("writing a request", write=True):
            try:
                row = await (await conn.execute(self._sql.update, params)).fetchone()
            except psycopg.errors.UniqueViolation as exc:
                if exc.diag.constraint_name != "grants_pkey":
                    raise
                raise _grants.duplicate(", ".join(g.id for g in transition.grants)) from exc
            except BaseException:
                self._unsure(request_id)
                raise
        return row is not None

    def _unsure(self, request_id: str) -> None:
        """A write of ``request_id`` raised once sent (lost connection, cancelled): it may
        have committed without this store waking its waiters, and the listener does not read
        for this store's own notes — so re-read the row for them on the store's loop."""
        if self._closed or not self._wake.waiters.has(request_id):
            return  # (closing fails every waiter)
        recheck = self._wake.recheck([request_id])
        try:
            future = asyncio.run_coroutine_threadsafe(recheck, self._loop.loop)
        except RuntimeError:  # closed meanwhile
            recheck.close()
            return
        future.add_done_callback(_seen)

    async def get_request(self, request_id: str) -> ApprovalRequest | None:
        async def job() -> ApprovalRequest | None:
            found = await self._retry_read(
                "reading a request", lambda c: self._read(c, request_id, "reading a request")
            )
            return found[0] if found else None

        return await self._call(job)

    async def _retry_read(self, doing: str, read: Callable[[Conn], Awaitable[T]]) -> T:
        """Reads have no side effects: one retry on a fresh connection if the first broke."""
        try:
            async with self._conn(doing) as conn:
                return await read(conn)
        except StoreError as exc:
            if not connection_lost(exc):
                raise
        async with self._conn(doing) as conn:
            return await read(conn)

    async def find_request_by_call(self, thread: str, tool_call_id: str) -> ApprovalRequest | None:
        async def read(conn: Conn) -> ApprovalRequest | None:
            cur = await conn.execute(self._sql.by_call, (thread, tool_call_id))
            row = await cur.fetchone()
            if row is None:
                return None
            return await self._settle(conn, row, "finding a request by call")

        return await self._call(lambda: self._retry_read("finding a request by call", read))

    async def list_requests(
        self,
        *,
        status: str | None = None,
        thread: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[ApprovalRequest]:
        query, args = _pg_sql.list_requests(self.schema, status=status, thread=thread, kind=kind)

        async def read(conn: Conn) -> list[ApprovalRequest]:
            cur = await conn.execute(query, [*args, limit, offset])
            good, bad = split(await cur.fetchall())
            if bad:
                await self._quarantine(conn, bad, "listing requests")
            return good

        return await self._call(lambda: self._retry_read("listing requests", read))

    async def due_requests(self, now: datetime, limit: int = 100) -> list[str]:
        """Claim up to ``limit`` due requests for this store's sweeper (a lease of ``claim_s``
        on the database clock); other replicas skip them until it ends or the row changes."""
        params = {
            "now": _pg_sql.aware(now),
            "origin": self.origin,
            "limit": limit,
            "lease_s": self.claim_s,
        }

        async def job() -> list[str]:
            async with self._conn("claiming due requests") as conn:
                for _ in range(10):  # a page of nothing but bad rows: claim again once marked
                    rows = await (await conn.execute(self._sql.claim_due, params)).fetchall()
                    due = {row[0]: row[6] for row in rows}
                    good, bad = split(rows)
                    marked = bool(bad) and await self._quarantine(conn, bad, "sweeping")
                    if good or not marked:
                        return [r.id for r in sorted(good, key=lambda r: (due[r.id], r.id))]
            return []

        return await self._call(job, write=True)

    async def next_due_at(self) -> datetime | None:
        async def read(conn: Conn) -> datetime | None:
            cur = await conn.execute(self._sql.next_due, {"origin": self.origin})
            row = await cur.fetchone()
            return row[0].astimezone(UTC) if row else None

        return await self._call(lambda: self._retry_read("finding the next deadline", read))

    # ---------------------------------------------------------------- grants
    async def create_grant(self, grant: Grant, events: list[AuditEvent]) -> Grant:
        """One statement: the grant, the version bump and the audit events."""
        params = {
            "grants": grants_json([grant]),
            "audit": entries_json(events),
            "origin": self.origin,
        }

        async def job() -> Grant:
            async with self._conn("storing a grant", write=True) as conn:
                row = await (await conn.execute(self._grant_sql.create, params)).fetchone()
                if row is not None:
                    return grant
                stored = await self._read_grant(conn, grant.id)
                if stored is None:  # impossible: the conflict was on this id
                    raise StoreError(f"grant {grant.id} conflicted but cannot be found")
                return _grants.same_or_conflict(stored, grant)

        return await self._call(job, write=True)

    async def revoke_grant(
        self,
        grant_id: str,
        *,
        by: str,
        reason: str | None,
        now: datetime,
        events: list[AuditEvent],
    ) -> Grant:
        """Read, then one conditional statement (``WHERE revoked_at IS NULL``): revoked row,
        version bump and audit; a revocation racing ours makes it write nothing."""

        async def job() -> Grant:
            async with self._conn("revoking a grant", write=True) as conn:
                stored = await self._read_grant(conn, grant_id)
                if stored is None:
                    raise NotFound(f"no grant {grant_id}")
                if stored.revoked_at is not None:
                    return stored
                done = _grants.revoked(stored, by=by, reason=reason, now=now)
                params = {
                    "id": grant_id,
                    "revoked_at": _pg_sql.aware(now),
                    "doc": done.model_dump_json(),
                    "audit": entries_json(events),
                    "origin": self.origin,
                }
                if await (await conn.execute(self._grant_sql.revoke, params)).fetchone():
                    return done
                again = await self._read_grant(conn, grant_id)  # revoked meanwhile
                assert again is not None  # grants are never deleted
                return again

        return await self._call(job, write=True)

    async def _read_grant(self, conn: Conn, grant_id: str) -> Grant | None:
        row = await (await conn.execute(self._grant_sql.read, (grant_id,))).fetchone()
        return _grants.parse(row[0], grant_id) if row else None

    async def get_grant(self, grant_id: str) -> Grant | None:
        return await self._call(
            lambda: self._retry_read("reading a grant", lambda c: self._read_grant(c, grant_id))
        )

    async def list_grants(
        self, *, active_at: datetime | None = None, limit: int = 1000
    ) -> list[Grant]:
        statement, args = (
            (self._grant_sql.every, [limit])
            if active_at is None
            else (self._grant_sql.active, [_pg_sql.aware(active_at), limit])
        )

        async def read(conn: Conn) -> list[Grant]:
            return _grants.readable(await (await conn.execute(statement, args)).fetchall())

        return await self._call(lambda: self._retry_read("listing grants", read))

    async def grants_version(self) -> int:
        async def read(conn: Conn) -> int:
            row = await (await conn.execute(self._grant_sql.version)).fetchone()
            return int(row[0]) if row else 0

        return await self._call(lambda: self._retry_read("reading the grants version", read))

    async def redaction_salt(self) -> bytes:
        query = sql.SQL("SELECT value FROM {s}.store_secrets WHERE name = 'redaction_salt'").format(
            s=sql.Identifier(self.schema)
        )

        async def read(conn: Conn) -> bytes:
            row = await (await conn.execute(query)).fetchone()
            if row is None:
                raise StoreError(f"PostgreSQL store {redact(self.dsn)} has no redaction salt")
            return bytes.fromhex(str(row[0]))

        return await self._call(lambda: self._retry_read("reading the redaction salt", read))

    async def note_expired_grants(self, now: datetime) -> list[Grant]:
        """One transaction: lock and mark the due rows (``SKIP LOCKED``: another replica's
        sweeper takes the rest), then chain one ``grant_expired`` event each."""

        async def job() -> list[Grant]:
            async with self._conn("noting expired grants", write=True) as conn:
                async with conn.transaction():
                    cur = await conn.execute(self._grant_sql.note_expired, (_pg_sql.aware(now),))
                    rows = sorted(await cur.fetchall(), key=lambda r: (r[2], r[0]))
                    expired = _grants.readable([(r[0], r[1]) for r in rows])
                    if expired:
                        audit = entries_json([_grants.expired_event(g, now) for g in expired])
                        await conn.execute(self._sql.append_audit, (audit, self.origin))
                return expired

        return await self._call(job, write=True)

    # ---------------------------------------------------------------- quarantine
    async def count_requests(self) -> RequestCounts:
        async def read(conn: Conn) -> RequestCounts:
            row = await (await conn.execute(self._sql.count)).fetchone()
            assert row is not None
            return RequestCounts(int(row[0]), int(row[1]))

        return await self._call(lambda: self._retry_read("counting requests", read))

    async def quarantined_requests(self, limit: int = 100) -> list[QuarantinedRequest]:
        async def read(conn: Conn) -> list[QuarantinedRequest]:
            rows = await (await conn.execute(self._sql.quarantined, (limit,))).fetchall()
            return [
                QuarantinedRequest(rid, thread, status, at.astimezone(UTC), why or "unreadable")
                for rid, thread, status, at, why in rows
            ]

        return await self._call(lambda: self._retry_read("listing quarantined rows", read))

    async def cancel_quarantined(
        self, request_id: str, *, actor: str, reason: str | None = None
    ) -> QuarantinedRequest:
        async def job() -> QuarantinedRequest:
            async with self._conn("cancelling a quarantined request", write=True) as conn:
                row = await (
                    await conn.execute(self._sql.quarantine_state, (request_id,))
                ).fetchone()
                if row is None:
                    raise NotFound(f"no approval request {request_id}")
                thread, status, at, why = row
                if at is None:
                    raise StoreError(
                        f"request {request_id} is not quarantined; "
                        f"cancel it with `signoff cancel {request_id}`"
                    )
                if status == "pending":
                    event = cancelled_event(request_id, thread, actor, reason, why)
                    params = _pg_sql.cancel_quarantined_params(
                        request_id, event, self.origin, self.channel
                    )
                    if (await conn.execute(self._sql.cancel_quarantined, params)).rowcount:
                        status = "cancelled"
                    else:  # closed meanwhile by someone else: report what it is now
                        again = await (
                            await conn.execute(self._sql.quarantine_state, (request_id,))
                        ).fetchone()
                        status = again[1] if again else status
            return QuarantinedRequest(
                request_id, thread, status, at.astimezone(UTC), why or "unreadable"
            )

        closed = await self._call(job, write=True)
        self._wake.waiters.fail(
            closed.id, RequestQuarantined(closed.id, closed.reason, status=closed.status)
        )
        return closed

    async def check(self) -> StoreCheck:
        """``signoff db check``: schema version, audit triggers, privileges, quarantined rows
        — read only, on a connection of its own (never migrates)."""

        async def run() -> StoreCheck:
            conn = await Connections(
                self.dsn, min_size=1, max_size=1, timeout_s=self.timeout_s, direct=self.direct
            ).dedicated(direct=True)
            try:
                return await check_schema(conn, self.schema, redact(self.url), SCHEMA_VERSION)
            finally:
                await conn.close()

        with self._state_lock:
            if self._closed:
                raise StoreError(f"PostgreSQL store {redact(self.dsn)} is closed")
        return await self._loop.call(run())

    # ---------------------------------------------------------------- outbox
    async def enqueue_outbox(self, items: Sequence[OutboxItem]) -> int:
        if not items:
            return 0
        rows = outbox_json(items)

        async def job() -> int:
            async with self._conn("queueing notifications", write=True) as conn:
                return (await conn.execute(self._outbox.insert, (rows,))).rowcount

        return await self._call(job, write=True)

    async def claim_outbox(
        self,
        now: datetime,
        *,
        limit: int = 50,
        lease_s: float = 60.0,
        channels: Collection[str] | None = None,
    ) -> list[OutboxItem]:
        """Lease due rows with ``FOR UPDATE SKIP LOCKED``: every replica's worker takes
        different rows, none waits for another's."""
        if limit <= 0 or (channels is not None and not channels):
            return []
        params = claim_params(now, limit, lease_s, channels)

        async def job() -> list[OutboxItem]:
            async with self._conn("claiming notifications") as conn:
                rows = await (await conn.execute(self._outbox.claim, params)).fetchall()
            items = [outbox_item(row) for row in rows]
            return sorted(items, key=lambda i: (i.next_at, i.id))

        return await self._call(job, write=True)

    async def complete_outbox(
        self,
        item_id: str,
        *,
        status: OutboxOutcome = "sent",
        ref: dict[str, Any] | None = None,
        error: str | None = None,
        audit: Sequence[AuditEvent] = (),
    ) -> None:
        args = (status, ref_json(ref), error, item_id)

        async def job() -> None:
            async with self._conn("finishing a notification", write=True) as conn:
                if not audit:
                    await conn.execute(self._outbox.complete, args)
                    return
                async with conn.transaction():  # the outcome and its audit event: both or neither
                    await conn.execute(self._outbox.complete, args)
                    await conn.execute(
                        self._sql.append_audit, (entries_json(list(audit)), self.origin)
                    )

        await self._call(job, write=True)

    async def retry_outbox(self, item_id: str, *, next_at: datetime, error: str) -> None:
        args = (_pg_sql.aware(next_at), error, item_id)

        async def job() -> None:
            async with self._conn("rescheduling a notification", write=True) as conn:
                await conn.execute(self._outbox.retry, args)

        await self._call(job, write=True)

    async def cancel_outbox_for(
        self, request_id: str, kinds: Collection[str] = PROMPT_KINDS
    ) -> int:
        if not kinds:
            return 0
        args = (request_id, sorted(kinds))

        async def job() -> int:
            async with self._conn("cancelling notifications", write=True) as conn:
                return (await conn.execute(self._outbox.cancel_for, args)).rowcount

        return await self._call(job, write=True)

    async def outbox_for(self, request_id: str) -> list[OutboxItem]:
        async def read(conn: Conn) -> list[OutboxItem]:
            cur = await conn.execute(self._outbox.for_request, (request_id,))
            return [outbox_item(row) for row in await cur.fetchall()]

        return await self._call(lambda: self._retry_read("reading notifications", read))

    async def next_outbox_at(self, channels: Collection[str] | None = None) -> datetime | None:
        if channels is not None and not channels:
            return None
        params = channels_param(channels)

        async def read(conn: Conn) -> datetime | None:
            row = await (await conn.execute(self._outbox.next_at, params)).fetchone()
            return row[0].astimezone(UTC) if row and row[0] is not None else None

        return await self._call(lambda: self._retry_read("finding the next notification", read))

    # ---------------------------------------------------------------- waiting
    async def wait(self, request_id: str, timeout: float | None = None) -> ApprovalRequest:
        async def read(rid: str) -> ApprovalRequest | None:
            # Subscribed before reading: a decision committed after this read is notified.
            # (Connected now and lost later is the listener's to mend: it re-reads every
            # waited request once it is back.)
            listener = self._listener
            if listener is None or not listener.connected:
                await self._call(lambda: self._listening().ready(self.timeout_s), home=True)
            return await self.get_request(rid)

        await self._ready()
        return await wait_until_terminal(self._wake.waiters, read, request_id, timeout)

    def _listening(self) -> Listener:
        if self._listener is None:
            raise StoreError(f"PostgreSQL store {redact(self.dsn)} is not open")
        return self._listener

    def add_listener(self, listener: ChangeListener) -> Callable[[], None]:
        remove = self._wake.listeners.add(listener)
        opening = self._opening
        if opening is not None and opening.done() and opening.exception() is None:
            self._loop.loop.call_soon_threadsafe(self._listening().start)
        return remove

    # ---------------------------------------------------------------- audit
    def audit_nowait(self, event: AuditEvent) -> None:
        if self._closed:
            raise StoreError(
                f"PostgreSQL store {redact(self.dsn)} is closed; the audit event was not recorded"
            )
        self._batcher.put(event)

    async def _write_audit(self, events: list[AuditEvent]) -> None:
        async with self._conn("writing audit events", write=True) as conn:
            await conn.execute(self._sql.append_audit, (entries_json(events), self.origin))

    async def append_audit(self, events: list[AuditEvent]) -> None:
        if events:
            await self._call(lambda: self._write_audit(events), write=True)

    async def flush_audit(self) -> None:
        await self._call(self._batcher.flush, write=True, home=True)

    def audit_failure(self) -> str | None:
        return self._batcher.error

    async def check_writable(self) -> None:
        """A write lock on the requests table proves INSERT/UPDATE privileges and a primary
        (not a read-only standby), without writing anything."""

        async def probe() -> None:
            async with (
                self._conn("checking the store is writable", write=True) as conn,
                conn.transaction(),
            ):
                await conn.execute(self._sql.check_writable)

        try:
            await self._call(probe, write=True)
        except StoreError as exc:
            raise StoreError(
                f"PostgreSQL store {redact(self.dsn)} is not writable: {exc}; connect as the "
                "app role with the privileges in docs/deploy.md, to the primary"
            ) from exc

    async def read_audit(self, query: AuditQuery = AuditQuery()) -> list[AuditRecord]:
        statement, args = _pg_sql.select_audit(self.schema, query)

        async def read(conn: Conn) -> list[AuditRecord]:
            return [
                to_record(row) for row in await (await conn.execute(statement, args)).fetchall()
            ]

        return await self._call(lambda: self._retry_read("reading the audit log", read))

    async def audit_head(self) -> tuple[int, str]:
        async def read(conn: Conn) -> tuple[int, str]:
            row = await (await conn.execute(self._sql.audit_last)).fetchone()
            return (int(row[0]), str(row[1])) if row else (0, GENESIS_HASH)

        return await self._call(lambda: self._retry_read("reading the audit log's head", read))

    async def verify_audit(self) -> AuditVerification:
        """Walk the chain in chunks: rows are fetched on the store loop, hashed on a thread."""
        verifier = ChainVerifier()

        def feed(chunk: list[AuditRecord]) -> bool:
            return all(verifier.feed(record) for record in chunk)

        after = 0
        while chunk := await self._call(functools.partial(self._audit_chunk, after)):
            if not await asyncio.to_thread(feed, chunk):
                break
            after = chunk[-1].seq
        return verifier.result()

    async def _audit_chunk(self, after: int) -> list[AuditRecord]:
        async def read(conn: Conn) -> list[AuditRecord]:
            cur = await conn.execute(self._sql.audit_chunk, (after, _VERIFY_CHUNK))
            return [to_record(row) for row in await cur.fetchall()]

        return await self._retry_read("verifying the audit log", read)

    async def count_events(
        self,
        event: str,
        *,
        tool: str,
        since: datetime,
        by: str | None = None,
        value: str | None = None,
    ) -> int:
        statement, args = _pg_sql.count_audit(self.schema, event, tool, since, by, value)

        async def read(conn: Conn) -> int:
            row = await (await conn.execute(statement, args)).fetchone()
            return int(row[0]) if row else 0

        return await self._call(lambda: self._retry_read("counting audit events", read))

    async def run(
        self, job: Callable[[Conn], Awaitable[T]], *, doing: str, write: bool = False
    ) -> T:
        """Run ``job`` with a pooled autocommit connection on the store's loop.

        For components that keep their own tables next to the store's (the server's tokens,
        sessions and links), so they share its connections, errors and recovery.
        """

        async def call() -> T:
            async with self._conn(doing, write=write) as conn:
                return await job(conn)

        return await self._call(call)

    async def grant(self, role: str, *, server: bool) -> None:
        """Grant ``role`` what a replica needs (run as the schema's owner, after opening)."""

        async def job(conn: Conn) -> None:
            await grant(conn, self.schema, role, server=server)

        await self.run(job, doing=f"granting {role} access")

    async def repair_audit_triggers(self) -> list[str]:
        """Recreate or re-enable the audit log's append-only triggers (as the schema's owner,
        after opening: ``signoff db upgrade``); returns what was repaired."""

        async def job(conn: Conn) -> list[str]:
            return await repair_audit_triggers(conn, self.schema)

        return await self.run(job, doing="repairing the audit triggers", write=True)

    async def schema_version(self) -> tuple[int, int]:
        """(the database's schema version, the one this signoff writes), without migrating."""

        async def read() -> int:
            conn = await Connections(
                self.dsn, min_size=1, max_size=1, timeout_s=self.timeout_s, direct=self.direct
            ).dedicated(direct=True)
            try:
                return await current_version(conn, self.schema)
            finally:
                await conn.close()

        with self._state_lock:
            if self._closed:
                raise StoreError(f"PostgreSQL store {redact(self.dsn)} is closed")
        return await self._loop.call(read()), SCHEMA_VERSION

    # ---------------------------------------------------------------- clock and stats
    def now(self) -> datetime:
        """The database's clock, estimated without a round trip (offset measured at open)."""
        return utcnow() + self._clock_offset

    async def clock(self) -> datetime:
        """The database's clock, read now (one round trip)."""

        async def read(conn: Conn) -> datetime:
            row = await (await conn.execute("SELECT now()")).fetchone()
            assert row is not None
            return row[0].astimezone(UTC)  # type: ignore[no-any-return]

        return await self._call(lambda: self._retry_read("reading the clock", read))

    def stats(self) -> dict[str, Any]:
        listener = self._listener
        return {
            "backend": "postgresql",
            "dsn": redact(self.dsn),
            "schema": self.schema,
            "origin": self.origin,
            "waiters": len(self._wake.waiters),
            "listening": bool(listener and listener.connected),
            "listener_connects": listener.connects if listener else 0,
            "notifications": listener.notifications if listener else 0,
            "rechecks": listener.rechecks if listener else 0,
            "cross_process_wakes": self._wake.cross_process_wakes,
            "note_reads": self._wake.note_reads,
            "rechecked_wakes": self._wake.rechecked_wakes,
            "replayed_to_listeners": self._wake.replayed,
            "update_retries": self._retries,
            "updates_without_read": self._unread_updates,
            "audit_queued": len(self._batcher),
            "audit_batches": self._batcher.batches,
            "audit_batched_events": self._batcher.batched_events,
            "clock_offset_s": round(self._clock_offset.total_seconds(), 6),
            "pool": self._connections.stats() if self._connections else {},
        }


async def _clock_offset(conn: Conn) -> timedelta:
    """Database clock minus this machine's, halfway through one round trip."""
    before = utcnow()
    row = await (await conn.execute("SELECT now()")).fetchone()
    after = utcnow()
    assert row is not None
    db_now: datetime = row[0]
    return db_now - (before + (after - before) / 2)


def _seen(done: concurrent.futures.Future[None]) -> None:
    """A re-read that failed (database down) is left to the listener's reconnect."""
    if not done.cancelled() and done.exception() is not None:
        log.warning("re-reading a request after an unsure write failed: %s", done.exception())


def _close_at_exit(ref: weakref.ReferenceType[PostgresStore]) -> None:
    """Flush queued audit events of a store its owner forgot to close."""
    store = ref()
    if store is None:
        return
    with store._state_lock:
        if store._closed:
            return
        store._closed = True
        opening = store._opening
    try:
        store._shutdown(opening)
    except Exception:
        log.exception("closing the PostgreSQL store at exit failed")
