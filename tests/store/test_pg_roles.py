"""Least privilege: the owner migrates and grants (``signoff db upgrade --grant ROLE``); the
replicas' role then runs everything — requests, decisions, the sweeper, LISTEN, the audit
log, the server's tokens and links — but cannot rewrite the audit log or create tables."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

from signoff.cli import app
from signoff.model import AuditEvent, utcnow
from signoff.server.db_postgres import PostgresServerDB
from signoff.server.records import LinkRecord, TokenRecord, digest
from signoff.store.postgres import PostgresStore
from tests.store.factories import created_events, decide, decision, make_request
from tests.store.pg_cluster import drop_schema
from tests.store.pg_worker import sweep_once


@pytest.fixture
def app_role(pg_url: str) -> Iterator[tuple[str, str]]:
    """(role, URL connecting as it) — a role with no rights of its own."""
    role, schema = f"app_{secrets.token_hex(4)}", f"roles_{secrets.token_hex(4)}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    yield role, schema
    drop_schema(pg_url, schema)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


async def test_the_replica_role_runs_everything_but_cannot_rewrite_the_audit_log(
    pg_url: str, app_role: tuple[str, str]
) -> None:
    role, schema = app_role
    upgrade = await asyncio.to_thread(
        CliRunner().invoke,
        app,
        ["db", "upgrade", "--store", f"{pg_url}?schema={schema}", "--grant", role],
    )
    assert upgrade.exit_code == 0, upgrade.output
    as_app = pg_url.replace("postgres@", f"{role}@", 1)

    async with PostgresStore(as_app, schema=schema) as store:
        assert store.migrations_applied == []  # nothing to create: no DDL attempted
        request = make_request(timeout_s=60)
        await store.create_request(request, created_events(request))
        short = make_request(thread="t-2", timeout_s=0.2)
        await store.create_request(short, created_events(short))
        waiter = asyncio.create_task(store.wait(request.id, timeout=30))
        await decide(store, request.id, decision(approver="alice"))
        assert (await waiter).status == "resolved"
        await asyncio.sleep(0.3)
        assert await sweep_once(store) == [short.id]
        store.audit_nowait(AuditEvent(event="allowed", tool="t"))
        await store.flush_audit()
        assert (await store.verify_audit()).ok

        server = PostgresServerDB(store)
        await server.open()
        now = utcnow().timestamp()
        await server.add_token(TokenRecord("tok_1", digest("so_agent_x"), "agent", "bot", now))
        assert (await server.token_by_hash(digest("so_agent_x"))) is not None
        assert await server.revoke_token("tok_1", now)  # the token trigger may bump its row
        assert await server.tokens_version() == 2
        link = LinkRecord(digest("l"), "approve", "alice", now, now + 60, request.id)
        await server.add_link(link)
        assert await server.consume_link(digest("l"), now) is not None
        assert await server.consume_link(digest("l"), now) is None  # single use

    s = sql.Identifier(schema)
    with psycopg.connect(as_app, autocommit=True) as conn:
        for statement in (
            "UPDATE {}.audit SET actor = 'mallory'",
            "DELETE FROM {}.audit",
            "TRUNCATE {}.audit",
            "CREATE TABLE {}.mine (x int)",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql.SQL(statement).format(s))
