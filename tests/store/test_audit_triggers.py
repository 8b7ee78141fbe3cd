"""The audit table's append-only triggers come back: SQLite recreates them whenever a store
opens the file; on PostgreSQL (where the app role may not create triggers) `signoff db check`
reports them and `signoff db upgrade`, run as the owner, repairs them."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

from signoff.cli import app
from signoff.model import AuditEvent
from signoff.store import SQLiteStore
from signoff.store.postgres import PostgresStore
from tests.store.pg_cluster import drop_schema

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def sqlite_triggers(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT name FROM sqlite_master WHERE type='trigger' AND tbl_name='audit'"
        )
        return {name for (name,) in rows}


def test_sqlite_db_check_reports_dropped_triggers_and_upgrade_recreates_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    url = f"sqlite:///{path}"
    assert invoke("db", "upgrade", "--store", url)[0] == 0
    with sqlite3.connect(path) as db:
        db.execute("DROP TRIGGER audit_no_delete")
    code, output = invoke("db", "check", "--store", url)
    assert code == 1 and "missing audit_no_delete" in output and "signoff db upgrade" in output
    code, output = invoke("db", "upgrade", "--store", url, "--json")
    assert code == 0 and json.loads(output)["audit_triggers_repaired"] == [
        "recreated audit_no_delete"
    ]
    assert sqlite_triggers(path) == {"audit_no_update", "audit_no_delete"}
    assert invoke("db", "check", "--store", url)[0] == 0


async def test_any_sqlite_open_recreates_the_triggers_and_logs_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.db"
    async with SQLiteStore(path) as store:
        await store.append_audit([AuditEvent(event="allowed", tool="t")])
        assert store.triggers_recreated == ()
    with sqlite3.connect(path) as db:
        db.execute("DROP TRIGGER audit_no_update")
        db.execute("DROP TRIGGER audit_no_delete")
    with caplog.at_level(logging.WARNING, logger="signoff.store"):
        async with SQLiteStore(path) as store:
            assert store.triggers_recreated == ("audit_no_update", "audit_no_delete")
    assert "append-only triggers were missing and have been recreated" in caplog.text
    with sqlite3.connect(path) as db, pytest.raises(sqlite3.IntegrityError, match="append-only"):
        db.execute("DELETE FROM audit")


@pytest.fixture
def pg_schema(pg_url: str) -> Iterator[tuple[str, str]]:
    schema = f"trg_{secrets.token_hex(4)}"
    yield pg_url, schema
    drop_schema(pg_url, schema)


def _pg(url: str, statement: str, schema: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL(statement).format(s=sql.Identifier(schema)))


async def test_postgres_triggers_are_reported_and_repaired_by_the_owner(
    pg_schema: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    url, schema = pg_schema
    store_url = f"{url}?schema={schema}"
    assert (await asyncio.to_thread(invoke, "db", "upgrade", "--store", store_url))[0] == 0
    _pg(url, "DROP TRIGGER audit_no_update_or_delete ON {s}.audit", schema)
    _pg(url, "ALTER TABLE {s}.audit DISABLE TRIGGER audit_no_truncate", schema)

    with caplog.at_level(logging.WARNING, logger="signoff.store"):
        async with PostgresStore(url, schema=schema):
            pass  # a replica only warns: it may not create triggers
    assert "missing audit_no_update_or_delete, audit_no_truncate disabled" in caplog.text

    code, output = await asyncio.to_thread(invoke, "db", "check", "--store", store_url)
    assert code == 1 and "missing audit_no_update_or_delete" in output
    assert "audit_no_truncate disabled" in output and "as the schema's owner" in output

    code, output = await asyncio.to_thread(invoke, "db", "upgrade", "--store", store_url)
    assert code == 0, output
    assert "recreated audit_no_update_or_delete, enabled audit_no_truncate" in output
    code, output = await asyncio.to_thread(invoke, "db", "check", "--store", store_url)
    assert code == 0, output
    async with PostgresStore(url, schema=schema) as store:
        await store.append_audit([AuditEvent(event="allowed", tool="t")])
    for statement in ("DELETE FROM {s}.audit", "TRUNCATE {s}.audit"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            _pg(url, statement, schema)
    code, output = await asyncio.to_thread(invoke, "db", "upgrade", "--store", store_url, "--json")
    assert json.loads(output)["audit_triggers_repaired"] == []  # nothing left to repair
