"""Connections for the PostgreSQL store: a small pool for statements, and clear errors.

Fail closed, then recover: when the database is unreachable, every operation raises
:class:`StoreError` within ``timeout_s`` saying so (the gate then refuses to run the tool);
when it comes back, the pool reconnects and the next operation works — nobody restarts
signoff. After a database restart every pooled connection is dead but does not know it yet;
checking each one with a query would cost a round trip per operation, so a borrowed
connection is instead checked for an unread end-of-stream on its socket (microseconds): an
idle connection has nothing to read unless the server has hung up on it.
"""

from __future__ import annotations

import contextlib
import logging
import select
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import make_conninfo
from psycopg.pq import ConnStatus, TransactionStatus

from signoff.model import StoreError
from signoff.store._pg_slots import Slots

log = logging.getLogger("signoff.store")

Conn = AsyncConnection[tuple[Any, ...]]


def redact(dsn: str) -> str:
    """``dsn`` without its password, for messages and logs."""
    if "://" in dsn:
        parts = urlsplit(dsn)
        if parts.password is not None:
            host = parts.netloc.rpartition("@")[2]
            user = parts.username or ""
            return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
        return dsn
    return " ".join(
        "password=***" if word.startswith("password=") else word for word in dsn.split()
    )


def looks_dead(conn: Conn) -> bool:
    """True when an idle connection cannot be used: closed, broken, or hung up on."""
    pgconn = conn.pgconn
    if conn.closed or pgconn.status != ConnStatus.OK:
        return True
    if pgconn.transaction_status != TransactionStatus.IDLE:
        return True
    try:
        readable, _, _ = select.select([pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.OperationalError):
        return True
    return bool(readable)


class Connections:
    """The statement pool of one store: up to ``max_size`` autocommit connections.

    Borrowed from any event loop or thread, one borrower at a time per connection (psycopg's
    async connection binds to no loop while nobody contends for its lock): the slots count
    across loops (:class:`~signoff.store._pg_slots.Slots`), the idle list is a deque.

    Why not ``psycopg_pool``: its reconnect attempts back off exponentially (from 1 s,
    doubling), so after an outage of a minute operations keep failing for up to another
    minute once the database is back. Here a caller that finds no idle connection simply
    connects — refused at once while the database is down (fail closed), and successful on
    the first operation after it returns (recover).
    """

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int,
        max_size: int,
        timeout_s: float,
        direct: dict[str, str] | None = None,
    ) -> None:
        self.dsn = dsn
        # LISTEN and migrations (a session advisory lock) need PostgreSQL itself, not a
        # transaction-pooling PgBouncer: ``direct`` overrides host/port for those two.
        self.direct_dsn = make_conninfo(dsn, **direct) if direct else dsn
        self.where = redact(dsn)
        self.timeout_s = timeout_s
        self.min_size, self.max_size = min_size, max_size
        self.kwargs: dict[str, Any] = {"autocommit": True}
        defaults = {
            "connect_timeout": max(2, round(timeout_s)),
            # a peer that vanished without a FIN is noticed in ~1 min, not ~15 (TCP timeout)
            "keepalives": 1,
            "keepalives_idle": 30,
            "keepalives_interval": 10,
            "keepalives_count": 3,
        }
        self.kwargs.update({k: v for k, v in defaults.items() if k not in dsn})
        self._idle: deque[Conn] = deque()
        self._slots = Slots(max_size)
        self._closed = False
        self.discarded = 0
        self.opened = 0

    async def open(self, first: Conn) -> None:
        """Keep ``first`` (the migration's connection) and open up to ``min_size``."""
        if self.direct_dsn == self.dsn:
            self._idle.append(first)
        else:
            await first.close()
        for _ in range(self.min_size - len(self._idle)):
            self._idle.append(await self.dedicated())

    async def close(self) -> None:
        self._closed = True
        while self._idle:
            with contextlib.suppress(Exception):
                await self._idle.popleft().close()

    def stats(self) -> dict[str, int]:
        return {
            "idle": len(self._idle),
            "in_use": self._slots.in_use,
            "max": self.max_size,
            "opened": self.opened,
            "dead_discarded": self.discarded,
        }

    @asynccontextmanager
    async def connection(self, doing: str, *, write: bool = False) -> AsyncIterator[Conn]:
        """A live connection; psycopg errors inside become :class:`StoreError`."""
        if self._closed:
            raise StoreError(f"PostgreSQL store {self.where} is closed")
        if not await self._slots.acquire(self.timeout_s):
            raise StoreError(
                f"PostgreSQL store {self.where}: all {self.max_size} connections stayed busy "
                f"for {self.timeout_s:g} s while {doing}; nothing was changed (raise pool_max?)"
            )
        conn: Conn | None = None
        try:
            conn = await self._live()
            with self.errors(doing, write=write):
                yield conn
        finally:
            if conn is not None:
                await self._release(conn)
            self._slots.release()

    async def _live(self) -> Conn:
        while self._idle:
            conn = self._idle.pop()  # the most recently used: the likeliest to be warm
            if not looks_dead(conn):
                return conn
            self.discarded += 1
            with contextlib.suppress(Exception):
                await conn.close()
        return await self.dedicated()

    async def _release(self, conn: Conn) -> None:
        pgconn = conn.pgconn
        usable = not conn.closed and pgconn.status == ConnStatus.OK
        if usable and pgconn.transaction_status != TransactionStatus.IDLE:
            with contextlib.suppress(Exception):
                await conn.rollback()  # cancelled mid-transaction: never hand that on
            usable = pgconn.transaction_status == TransactionStatus.IDLE
        if usable and not self._closed:
            self._idle.append(conn)
        else:
            with contextlib.suppress(Exception):
                await conn.close()

    async def dedicated(self, *, direct: bool = False) -> Conn:
        """A new connection: the pool's, or (``direct``) one that keeps its own session."""
        try:
            conn = await AsyncConnection.connect(
                self.direct_dsn if direct else self.dsn, **self.kwargs
            )
        except psycopg.Error as exc:
            raise StoreError(
                f"PostgreSQL store {self.where}: cannot connect: {_first_line(exc)} "
                "(is the database up, and are host, port, user and password right?); "
                "nothing was changed"
            ) from exc
        self.opened += 1
        return conn

    @contextmanager
    def errors(self, doing: str, *, write: bool = False) -> Iterator[None]:
        try:
            yield
        except psycopg.OperationalError as exc:
            outcome = (
                "the change may or may not have been committed: read the request again"
                if write
                else "nothing was changed"
            )
            raise StoreError(
                f"PostgreSQL store {self.where}: lost the database while {doing}: "
                f"{_first_line(exc)}; {outcome}"
            ) from exc
        except psycopg.Error as exc:
            raise StoreError(
                f"PostgreSQL store {self.where}: {doing} failed: {_first_line(exc)}"
            ) from exc


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def connection_lost(exc: BaseException) -> bool:
    """True when ``exc`` (a translated StoreError) came from a broken connection."""
    return isinstance(exc.__cause__, psycopg.OperationalError) and "lost the database" in str(exc)
