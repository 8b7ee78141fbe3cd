"""Pick the :class:`~signoff.server.records.ServerDB` that lives beside a store."""

from __future__ import annotations

from signoff.model import StoreError
from signoff.server.db_memory import MemoryServerDB
from signoff.server.db_sqlite import SQLiteServerDB
from signoff.server.records import ServerDB
from signoff.store import MemoryStore, SQLiteStore, Store


def server_db_for(store: Store) -> ServerDB:
    """Tokens, sessions and links in the store's own database (SQLite, PostgreSQL) or memory."""
    if isinstance(store, SQLiteStore):
        return SQLiteServerDB(store.path, busy_timeout_ms=store.busy_timeout_ms)
    if isinstance(store, MemoryStore):
        return MemoryServerDB()
    if type(store).__name__ == "PostgresStore":  # imported only with the signoff[postgres] extra
        from signoff.server.db_postgres import PostgresServerDB
        from signoff.store.postgres import PostgresStore

        assert isinstance(store, PostgresStore)
        return PostgresServerDB(store)
    raise StoreError(
        f"signoff serve does not know where to keep tokens for the store {store.url!r}; "
        "use a sqlite:///, postgresql:// or memory:// store"
    )
