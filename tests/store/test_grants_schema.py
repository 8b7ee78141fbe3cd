"""Grants where a backend's own machinery matters: the schema version 4 migration (thread
approvals dropped, grants and their version row added, the app role granted), another
process revoking, and the indexes the gate's and the sweeper's reads use."""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

from signoff.cli import app
from signoff.model import utcnow
from signoff.store import SQLiteStore
from signoff.store import _pg_schema as pg_schema
from signoff.store import _sqlite_schema as sqlite_schema
from signoff.store._idempotency import fingerprints
from signoff.store._sqlite_grants import ACTIVE_SQL, UNNOTED_SQL, VERSION_SQL
from signoff.store._sqlite_rows import insert_request
from signoff.store.postgres import PostgresStore
from tests.store.factories import grant_created, make_request, revoke_grant, subprocess_env
from tests.store.pg_cluster import drop_schema

runner = CliRunner()


def tables(conn: sqlite3.Connection) -> set[str]:
    return {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


# ---------------------------------------------------------------- SQLite
def version_3_file(path: Path) -> str:
    """A schema version 3 file holding one request approved for its thread; its id."""
    request = make_request(thread="t-9")
    with sqlite3.connect(path) as conn:
        for step in sqlite_schema.MIGRATIONS[:3]:
            step(conn)
        conn.execute("PRAGMA user_version = 3")
        insert_request(conn, request, fingerprints(request))
        conn.execute(
            "INSERT INTO thread_grants (thread, request_id, tool_call_id, approver, at) "
            "VALUES ('t-9', ?, 'call-1', 'alice', '2026-11-01T00:00:00.000000Z')",
            (request.id,),
        )
    return request.id


async def test_db_upgrade_takes_a_version_3_file_to_grants(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    request_id = version_3_file(path)
    result = await asyncio.to_thread(
        runner.invoke, app, ["db", "upgrade", "--store", f"sqlite:///{path}"]
    )
    assert result.exit_code == 0, result.output
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == sqlite_schema.SCHEMA_VERSION
        assert sqlite_schema.SCHEMA_VERSION >= 4
        assert "thread_grants" not in tables(conn)  # not carried over: no rule, agent or expiry
        assert {"grants", "grants_version"} <= tables(conn)
        assert conn.execute("SELECT id, version FROM grants_version").fetchall() == [(1, 0)]
    async with SQLiteStore(path) as store:
        assert (await store.get_request(request_id)) is not None
        assert await store.list_grants() == []
        grant = await grant_created(store)
        assert await store.list_grants(active_at=utcnow()) == [grant]
        assert await store.grants_version() == 1
        assert (await store.check()).ok


async def test_a_revocation_in_another_process_changes_the_version_seen_here(
    sqlite_store: SQLiteStore,
) -> None:
    grant = await grant_created(sqlite_store)
    seen = await sqlite_store.grants_version()
    script = textwrap.dedent(
        f"""
        import asyncio
        from signoff.model import utcnow
        from signoff.store import SQLiteStore

        async def main():
            async with SQLiteStore({sqlite_store.path!r}) as store:
                await store.revoke_grant(
                    {grant.id!r}, by="carol", reason="other process", now=utcnow(), events=[]
                )

        asyncio.run(main())
        """
    )
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", script],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert await sqlite_store.grants_version() != seen
    assert await sqlite_store.list_grants(active_at=utcnow()) == []
    stored = await sqlite_store.get_grant(grant.id)
    assert stored is not None and stored.revoke_reason == "other process"


async def test_grant_reads_use_their_indexes(sqlite_store: SQLiteStore) -> None:
    now = utcnow()
    for i in range(5):
        await grant_created(sqlite_store, created_at=now - timedelta(hours=i * 3))
    with sqlite3.connect(sqlite_store.path) as conn:
        for query, args, index in (
            (ACTIVE_SQL, (now.timestamp(), 1000), "grants_active"),
            (UNNOTED_SQL, (now.timestamp(),), "grants_unnoted"),
            (VERSION_SQL, (), "INTEGER PRIMARY KEY"),
        ):
            plan = " ".join(str(r[-1]) for r in conn.execute("EXPLAIN QUERY PLAN " + query, args))
            assert index in plan, plan


# ---------------------------------------------------------------- PostgreSQL
@pytest.fixture
def app_role(pg_url: str) -> Iterator[tuple[str, str]]:
    """(role, schema) — a role with no rights of its own, and a schema name for the test."""
    role, schema = f"app_{secrets.token_hex(4)}", f"grants_{secrets.token_hex(4)}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    yield role, schema
    drop_schema(pg_url, schema)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def version_3_schema(pg_url: str, schema: str, role: str) -> None:
    """Schema version 3 as `signoff db upgrade --grant ROLE` left it, with a thread approval."""
    request = make_request(thread="t-9")
    with psycopg.connect(pg_url, autocommit=True) as conn, conn.transaction():
        conn.execute(pg_schema._q("CREATE SCHEMA {s}", schema))
        conn.execute(pg_schema._q(pg_schema._VERSION_TABLE, schema))
        for number, steps in enumerate(pg_schema.MIGRATIONS[:3], start=1):
            for statement in steps:
                conn.execute(pg_schema._q(statement, schema))
            conn.execute(
                pg_schema._q("INSERT INTO {s}.schema_migrations (version) VALUES (%s)", schema),
                (number,),
            )
        for statement in (
            "GRANT USAGE ON SCHEMA {s} TO {role}",
            "GRANT SELECT ON {s}.schema_migrations TO {role}",
            "GRANT SELECT, INSERT, UPDATE ON {s}.requests, {s}.call_keys, {s}.thread_grants, "
            "{s}.audit_head, {s}.outbox TO {role}",
            "GRANT SELECT, INSERT ON {s}.audit TO {role}",
        ):
            conn.execute(
                sql.SQL(statement).format(s=sql.Identifier(schema), role=sql.Identifier(role))
            )
        s = sql.Identifier(schema)
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.requests (id, kind, thread, status, created_at, due_at, version, "
                "doc) VALUES (%s, 'tool_call', 't-9', 'pending', now(), now(), 1, %s)"
            ).format(s),
            (request.id, request.model_dump_json()),
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.thread_grants (thread, request_id, tool_call_id, approver, at) "
                "VALUES ('t-9', %s, 'call-1', 'alice', now())"
            ).format(s),
            (request.id,),
        )


async def test_a_version_3_schema_upgrades_and_its_app_role_can_use_grants(
    pg_url: str, app_role: tuple[str, str]
) -> None:
    role, schema = app_role
    await asyncio.to_thread(version_3_schema, pg_url, schema, role)
    async with PostgresStore(pg_url, schema=schema) as owner:
        assert owner.migrations_applied == list(range(4, pg_schema.SCHEMA_VERSION + 1))
        report = await owner.check()
        assert report.ok, report.to_json()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        gone = conn.execute("SELECT to_regclass(%s)", (f"{schema}.thread_grants",)).fetchone()
        assert gone == (None,)

    as_app = pg_url.replace("postgres@", f"{role}@", 1)
    async with PostgresStore(as_app, schema=schema) as store:
        assert store.migrations_applied == []
        grant = await grant_created(store)
        expiring = await grant_created(store, created_at=utcnow() - timedelta(hours=9))
        assert await store.grants_version() == 2
        await revoke_grant(store, grant.id)
        assert await store.grants_version() == 3
        assert [g.id for g in await store.note_expired_grants(utcnow())] == [expiring.id]
        assert await store.list_grants(active_at=utcnow()) == []
        assert (await store.verify_audit()).ok


async def test_a_fresh_schema_grants_the_app_role_the_grant_tables(
    pg_url: str, app_role: tuple[str, str]
) -> None:
    role, schema = app_role
    upgrade = await asyncio.to_thread(
        runner.invoke,
        app,
        ["db", "upgrade", "--store", f"{pg_url}?schema={schema}", "--grant", role],
    )
    assert upgrade.exit_code == 0, upgrade.output
    as_app = pg_url.replace("postgres@", f"{role}@", 1)
    async with PostgresStore(as_app, schema=schema) as store:
        grant = await grant_created(store)
        await revoke_grant(store, grant.id)
        assert [g.revoked_by for g in await store.list_grants()] == ["carol"]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("REVOKE UPDATE ON {}.grants_version FROM {}").format(
                sql.Identifier(schema), sql.Identifier(role)
            )
        )
    async with PostgresStore(pg_url, schema=schema) as owner:
        report = await owner.check()
    detail = next(c.detail for c in report.items if c.name == "app_roles")
    assert not report.ok and f"{role} lacks UPDATE on grants_version" in detail


async def test_two_sweeping_replicas_note_each_expiry_once(pg_store: PostgresStore) -> None:
    past = utcnow() - timedelta(hours=9)
    ids = {(await grant_created(pg_store, created_at=past)).id for _ in range(20)}
    async with PostgresStore(pg_store.dsn, schema=pg_store.schema) as other:
        batches = await asyncio.gather(
            *(s.note_expired_grants(utcnow()) for s in (pg_store, other) * 3)
        )
    noted = [g.id for batch in batches for g in batch]
    assert sorted(noted) == sorted(ids)
    events = await pg_store.read_audit()
    assert sorted(r.data["grant_id"] for r in events if r.event == "grant_expired") == sorted(ids)
