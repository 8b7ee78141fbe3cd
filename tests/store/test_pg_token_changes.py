"""PostgreSQL: every change to the server's tokens table, by any replica or by raw SQL, moves
the version row the servers' token caches check (tests/server/test_token_cache.py has the rest)."""

from __future__ import annotations

import secrets

import psycopg
import pytest

from signoff.server import db_postgres
from signoff.server.db_postgres import PostgresServerDB
from signoff.server.records import digest
from signoff.server.token_cache import TokenCache
from signoff.server.tokens import create_token, revoke_token
from signoff.store import _pg_schema
from signoff.store.postgres import PostgresStore
from tests.server.test_token_cache import Clock
from tests.store.pg_cluster import drop_schema
from tests.store.test_pg_roles import app_role  # noqa: F401  (fixture)


async def test_postgresql_replicas_see_each_others_revocations(
    pg_url: str,
) -> None:
    schema = f"tokcache_{secrets.token_hex(4)}"
    stores = [PostgresStore(pg_url, schema=schema, pool_max=2) for _ in range(2)]
    try:
        for store in stores:
            await store.open()
        here, there = PostgresServerDB(stores[0]), PostgresServerDB(stores[1])
        await here.open()
        await there.open()
        clock = Clock()
        cache = TokenCache(here, clock=clock)
        raw, record = await create_token(there, "agent", "bot")
        assert (await cache.get(digest(raw))) == record
        version = await here.tokens_version()
        assert await revoke_token(there, record.id)
        assert await here.tokens_version() == version + 1
        clock.now += 0.5
        refused = await cache.get(digest(raw))
        assert refused is not None and not refused.active
        with psycopg.connect(pg_url, autocommit=True) as conn:  # raw SQL moves it too
            conn.execute(f'DELETE FROM "{schema}".server_tokens')
        assert await here.tokens_version() == version + 2
    finally:
        for store in stores:
            await store.close()
        drop_schema(pg_url, schema)


async def test_an_upgrade_lets_an_already_granted_role_use_the_version_row(
    pg_url: str,
    app_role: tuple[str, str],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Server tables made and granted by the previous version: after the owner's upgrade the
    replicas' role may read and bump the new row without running `--grant` again."""
    role, schema = app_role
    owner = PostgresStore(pg_url, schema=schema, pool_max=2)
    await owner.open()
    try:
        with monkeypatch.context() as old:
            old.setattr(db_postgres, "_MIGRATIONS", db_postgres._MIGRATIONS[:1])
            old.setattr(_pg_schema, "SERVER_GRANTS", _pg_schema.SERVER_GRANTS[:2])
            await PostgresServerDB(owner).open()
            await owner.grant(role, server=True)
        await PostgresServerDB(owner).open()  # the upgrade: version 2
    finally:
        await owner.close()
    as_app = pg_url.replace("postgres@", f"{role}@", 1)
    async with PostgresStore(as_app, schema=schema, pool_max=2) as store:
        server = PostgresServerDB(store)
        await server.open()
        cache = TokenCache(server, clock=Clock())
        raw, record = await create_token(server, "agent", "bot")
        assert (await cache.get(digest(raw))) == record
        assert await revoke_token(server, record.id)
        refused = await cache.get(digest(raw))
        assert refused is not None and not refused.active
        assert await server.tokens_version() == 2
