"""One LISTEN connection per store (per replica), fanning notifications out to local waiters.

The row is the truth and NOTIFY only a hint: a notification sent while this connection was
down is gone for good. So the store re-reads what its waiters wait for whenever the hint may
have been missed — right after (re)connecting, and every ``recheck_s`` as a safety net (which
also proves the connection is alive with a round trip, since a silently dropped TCP connection
would otherwise look like a quiet night). Reconnects back off from 50 ms to 2 s.

Runs on the store's loop. LISTEN needs a session of its own: it cannot go through PgBouncer
in transaction pooling mode (docs/deploy.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import psycopg
from psycopg import sql

from signoff._failing import Failing
from signoff.model import StoreError
from signoff.store._pg_conn import Connections

log = logging.getLogger("signoff.store")


@dataclass(frozen=True, slots=True)
class Note:
    """A decoded notification: which request changed, how, from which store, at which seq,
    and whether it is now terminal (None: not said, as by a store before this field)."""

    request_id: str
    event: str
    origin: str
    seq: int
    terminal: bool | None = None


def decode(payload: str) -> Note | None:
    try:
        data = json.loads(payload)
        terminal = data.get("terminal")
        return Note(
            str(data["id"]),
            str(data["event"]),
            str(data["origin"]),
            int(data["seq"]),
            terminal if isinstance(terminal, bool) else None,
        )
    except (ValueError, KeyError, TypeError):
        log.warning("ignoring a malformed signoff notification", extra={"size": len(payload)})
        return None


class Listener:
    def __init__(
        self,
        connections: Connections,
        channel: str,
        *,
        on_note: Callable[[Note], Awaitable[None]],
        on_connected: Callable[[bool], Awaitable[None]],
        on_recheck: Callable[[], Awaitable[None]],
        recheck_s: float,
    ) -> None:
        self._connections = connections
        self._channel = channel
        self._on_note = on_note
        self._on_connected = on_connected
        self._on_recheck = on_recheck
        self._recheck_s = recheck_s
        self._connected = asyncio.Event()
        self._failing = Failing(log, "LISTEN connection", level=logging.WARNING)
        self._task: asyncio.Task[None] | None = None
        self._conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None
        self.connects = 0
        self.notifications = 0
        self.rechecks = 0
        self.backend_pid: int | None = None
        self.last_error: str | None = None
        self.first_delay_s = 0.05  # before the first reconnect; doubles up to 2 s

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def ready(self, timeout: float) -> None:
        """Return once LISTEN is in place (a waiter must not read its row before that)."""
        self.start()
        try:
            await asyncio.wait_for(self._connected.wait(), timeout)
        except TimeoutError:
            raise StoreError(
                f"PostgreSQL store {self._connections.where}: cannot listen for decisions "
                f"({self.last_error or 'no connection'}); waiting would miss them, so it "
                "fails instead"
            ) from None

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        delay = self.first_delay_s
        while True:
            connects = self.connects
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except (psycopg.Error, StoreError) as exc:
                self.last_error = (str(exc).strip().splitlines() or [repr(exc)])[0]
                self._failing.failed(exc, retrying="reconnecting", traceback=False)
            except Exception as exc:
                self.last_error = repr(exc)
                self._failing.failed(exc, retrying="reconnecting")
            finally:
                self._connected.clear()
                await self._close()
            if self.connects != connects:  # it was up for a while: retry quickly
                delay = self.first_delay_s
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def _session(self) -> None:
        conn = self._conn = await self._connections.dedicated(direct=True)
        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
        self.backend_pid = conn.info.backend_pid
        first = self.connects == 0
        self.connects += 1
        self._connected.set()
        self.last_error = None
        self._failing.worked()
        await self._on_connected(first)
        while True:
            async for notify in conn.notifies(timeout=self._recheck_s):
                self.notifications += 1
                note = decode(notify.payload)
                if note is not None:
                    await self._on_note(note)
            # Prove the session is alive: a dead peer would otherwise look like a quiet night.
            await asyncio.wait_for(conn.execute("SELECT 1"), self._connections.timeout_s)
            self.rechecks += 1
            await self._on_recheck()

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()
