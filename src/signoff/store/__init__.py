"""Where approval requests and the audit log live. ``open_store(url)`` picks the backend.

* ``sqlite:///signoff.db`` — a file relative to the current directory (the default);
  ``sqlite:////var/lib/signoff/signoff.db`` — an absolute path. Query options:
  ``synchronous=full|normal|extra``, ``busy_timeout_ms=5000``, ``wake_interval_s=0.05``.
* ``memory://`` — in this process only (tests, demos).
* ``postgresql://user:pass@host:5432/db`` (or ``postgres://``) — with the ``signoff[postgres]``
  extra, for several ``signoff serve`` replicas on one database (docs/deploy.md). signoff's
  own query options: ``schema=signoff``, ``pool_min=1``, ``pool_max=8``, ``timeout_s=5``,
  ``recheck_s=30``, ``claim_s=10``, and ``direct_host``/``direct_port`` (PostgreSQL itself,
  for LISTEN and migrations, when the URL points at PgBouncer); every other one
  (``sslmode=require``…) goes to libpq.

The returned store is not open yet: ``await store.open()`` (or ``async with store:``), which
creates or migrates the schema. Every backend implements :class:`Store`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from signoff.model import StoreError
from signoff.store.base import (
    AuditQuery,
    ChangeListener,
    Mutation,
    QuarantinedRequest,
    RequestCounts,
    Store,
    StoreCheck,
)
from signoff.store.memory import MemoryStore
from signoff.store.sqlite import SQLiteStore

if TYPE_CHECKING:
    from signoff.store.postgres import PostgresStore

__all__ = [
    "AuditQuery",
    "ChangeListener",
    "MemoryStore",
    "Mutation",
    "QuarantinedRequest",
    "RequestCounts",
    "SQLiteStore",
    "Store",
    "StoreCheck",
    "open_store",
]

_SQLITE_OPTIONS = {"synchronous", "busy_timeout_ms", "wake_interval_s"}


def open_store(url: str) -> Store:
    """The store for ``url`` (not yet opened). Raises :class:`StoreError` for a bad URL."""
    scheme, sep, _ = url.partition("://")
    scheme = scheme.lower()
    if not sep:
        raise StoreError(
            f"store URL {url!r} has no scheme; use sqlite:///path.db, memory:// or postgresql://"
        )
    if scheme == "memory":
        return MemoryStore(url)
    if scheme == "sqlite":
        return _sqlite(url)
    if scheme in ("postgresql", "postgres"):
        return _postgres(url)
    raise StoreError(
        f"unknown store URL scheme {scheme!r} in {url!r}; "
        "use sqlite:///path.db, memory:// or postgresql://"
    )


_PG_OPTIONS = {
    "schema": str,
    "pool_min": int,
    "pool_max": int,
    "timeout_s": float,
    "recheck_s": float,
    "claim_s": float,
    "direct_host": str,
    "direct_port": int,
}


def _postgres(url: str) -> PostgresStore:
    """signoff's options come out of the query string; the rest of the URL goes to libpq."""
    try:
        from signoff.store.postgres import PostgresStore
    except ImportError as exc:  # psycopg is the optional extra
        raise StoreError(
            f"the store URL {url.split('@')[-1]!r} needs PostgreSQL support: "
            "pip install 'signoff[postgres]'"
        ) from exc
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in query if k in _PG_OPTIONS}
    libpq = urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in query if k not in ours])))
    try:
        options = {k: _PG_OPTIONS[k](v) for k, v in ours.items()}
    except ValueError as exc:
        raise StoreError(f"bad postgresql option in the store URL: {exc}") from None
    return PostgresStore(libpq, url=url, **options)


def _sqlite(url: str) -> SQLiteStore:
    parts = urlsplit(url)
    if parts.netloc:
        raise StoreError(
            f"store URL {url!r} names a host; write sqlite:///relative.db or "
            "sqlite:////absolute/path.db (three or four slashes)"
        )
    path = unquote(parts.path[1:])  # "/x.db" -> "x.db" (relative), "//abs.db" -> "/abs.db"
    if not path or path == ":memory:":
        raise StoreError(
            f"store URL {url!r} needs a file path (an in-memory SQLite database cannot be "
            "shared by the store's threads; use memory:// instead)"
        )
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = sorted(set(options) - _SQLITE_OPTIONS)
    if unknown:
        raise StoreError(
            f"unknown sqlite option {', '.join(unknown)} in {url!r}; "
            f"known: {', '.join(sorted(_SQLITE_OPTIONS))}"
        )
    try:
        return SQLiteStore(
            path,
            synchronous=options.get("synchronous", "FULL"),
            busy_timeout_ms=int(options.get("busy_timeout_ms", 5000)),
            wake_interval_s=float(options.get("wake_interval_s", 0.05)),
        )
    except ValueError as exc:
        raise StoreError(f"bad sqlite option in {url!r}: {exc}") from None
