"""Who in this process waits or listens, and how changes reach them (PostgreSQL store).

Three ways, because NOTIFY is only a hint:

* after this store's own COMMIT: wake at once, no database work (:meth:`Wakeups.committed`);
* on a notification from another store (another replica, the CLI): read the row, wake if it
  is terminal, tell listeners (:meth:`Wakeups.on_note`);
* when a notification may have been missed — LISTEN (re)connected, or the safety interval
  passed: re-read every waited-on row in one query, and replay to listeners the changes other
  stores logged meanwhile, found by the audit ``seq`` each notification carries.

Runs on the store's loop; waiters are futures of any loop (:mod:`._waiting`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from signoff.model import ApprovalRequest, AuditEvent
from signoff.store._pg_conn import Conn
from signoff.store._pg_listen import Note
from signoff.store._pg_sql import Statements
from signoff.store._quarantine import Unreadable, split, to_request
from signoff.store._sqlite_rows import STATE_EVENTS
from signoff.store._waiting import Listeners, Waiters, listener_event

Connect = Callable[[str], AbstractAsyncContextManager[Conn]]


class Wakeups:
    def __init__(self, origin: str, statements: Statements, connect: Connect) -> None:
        self.origin = origin
        self.waiters = Waiters()
        self.listeners = Listeners()
        self._sql = statements
        self._connect = connect
        self._seen_seq = 0  # the newest audit seq a notification or a catch-up covered
        self.cross_process_wakes = 0
        self.rechecked_wakes = 0
        self.replayed = 0
        self.note_reads = 0  # rows read because a notification arrived

    def committed(self, request: ApprovalRequest, events: list[AuditEvent]) -> None:
        """This store just committed ``request``: wake and tell locally, no round trip."""
        if request.terminal:  # the snapshot this store keeps: shared, read-only
            self.waiters.wake(request, shared=True)
        if self.listeners:
            self.listeners.notify(request, listener_event([e.event for e in events], request))

    async def on_note(self, note: Note) -> None:
        fresh = note.seq > self._seen_seq
        self._seen_seq = max(self._seen_seq, note.seq)
        # Our own commits wake our waiters and listeners themselves: right after the statement,
        # or, when its outcome is unknown (it raised or was cancelled once sent), by re-reading
        # the row (recheck(ids), PostgresStore._write) — so our own notes are never read for.
        # A change that left the request pending wakes nobody (a later change that ends it
        # sends a note of its own), so it is not read for either.
        own = note.origin == self.origin
        waited = not own and note.terminal is not False and self.waiters.has(note.request_id)
        tell = fresh and not own and bool(self.listeners)
        if not (waited or tell):
            return
        self.note_reads += 1
        async with self._connect("reading a changed request") as conn:
            row = await (await conn.execute(self._sql.read_doc, (note.request_id,))).fetchone()
        if row is None:
            return
        request, _ = to_request(row)
        if isinstance(request, Unreadable):  # quarantined (here or elsewhere): tell waiters
            self.waiters.fail(request.id, request.error())
            return
        if request.terminal:
            self.cross_process_wakes += self.waiters.wake(request)
        if tell:
            self.listeners.notify(request, note.event)

    async def on_listening(self, first: bool) -> None:
        """LISTEN is (again) in place: catch up on what it may have missed."""
        async with self._connect("catching up after LISTEN") as conn:
            row = await (await conn.execute(self._sql.audit_top)).fetchone()
            top = int(row[0]) if row else 0
            after, self._seen_seq = self._seen_seq, max(self._seen_seq, top)
            if not first and self.listeners and top > after:
                await self._replay(conn, after, top)
        await self.recheck()

    async def _replay(self, conn: Conn, after: int, top: int) -> None:
        """Tell listeners the last state event of each request other stores changed."""
        rows = await (
            await conn.execute(self._sql.foreign_changes, (after, top, self.origin))
        ).fetchall()
        changes: dict[str, str] = {}
        for request_id, event in rows:
            if event in STATE_EVENTS:
                changes.pop(request_id, None)
                changes[request_id] = event
        if not changes:
            return
        docs = await (await conn.execute(self._sql.read_docs, (list(changes),))).fetchall()
        by_id = {r.id: r for r in split(docs)[0]}  # an unreadable row is not replayed
        for request_id, event in changes.items():
            if request_id in by_id:
                self.replayed += 1
                self.listeners.notify(by_id[request_id], event)

    async def recheck(self, only: list[str] | None = None) -> None:
        """The safety net: wake waiters whose request ended without us hearing of it (of
        every waited request, or of those in ``only``)."""
        ids = self.waiters.ids()
        if only is not None:
            ids = [i for i in ids if i in only]
        if not ids:
            return
        async with self._connect("re-reading waited requests") as conn:
            rows = await (await conn.execute(self._sql.read_docs_terminal, (ids,))).fetchall()
        terminal, unreadable = split(rows)
        for request in terminal:
            self.rechecked_wakes += self.waiters.wake(request)
        for bad in unreadable:
            self.waiters.fail(bad.id, bad.error())
