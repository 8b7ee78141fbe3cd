"""Closing a PostgreSQL store lets a write already in flight finish: its caller gave up (the
write is shielded), so without waiting the pool would go and the loop stop with the
transaction still open — idle in transaction, holding its locks until the process exits
(seen as a DROP SCHEMA that never returned)."""

from __future__ import annotations

import asyncio
import secrets

import psycopg
import pytest

from signoff.store.postgres import PostgresStore
from tests.store.conftest import pg_url  # noqa: F401  (the run's throwaway PostgreSQL)
from tests.store.factories import created_events, make_request

pytestmark = pytest.mark.asyncio


async def test_close_waits_for_a_write_whose_caller_gave_up(pg_url: str) -> None:  # noqa: F811
    schema = f"t_{secrets.token_hex(6)}"
    store = PostgresStore(pg_url, schema=schema, pool_max=4)
    await store.open()
    request = make_request(thread="t-close")
    writing = asyncio.create_task(store.create_request(request, created_events(request)))
    await asyncio.sleep(0)  # the write is on its way to the store's loop
    writing.cancel()
    await store.close()
    async with PostgresStore(pg_url, schema=schema, pool_max=4) as reopened:
        assert await reopened.get_request(request.id) is not None  # the write finished
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '10s'")  # a held lock fails the test, never hangs it
        open_transactions = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%%'"
            " AND query LIKE %s",
            (f"%{schema}%",),
        ).fetchone()
        assert open_transactions == (0,)
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
