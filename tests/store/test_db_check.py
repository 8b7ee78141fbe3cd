"""``signoff db check``: exit 0 when the store is healthy, 1 naming what is wrong.

SQLite: integrity, schema version, the audit log's append-only triggers, quarantined rows.
PostgreSQL: schema version, audit triggers, audit privileges, the app roles' grants,
quarantined rows. Real files and the throwaway PostgreSQL cluster of the store tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

from signoff.cli import app
from signoff.store import SQLiteStore, Store
from signoff.store._sqlite_schema import _V1
from signoff.store.postgres import PostgresStore
from tests.store import pg_cluster
from tests.store.factories import created_events, make_request

runner = CliRunner()


def db_check(url: str, *extra: str) -> tuple[int, str]:
    result = runner.invoke(app, ["db", "check", "--store", url, *extra])
    return result.exit_code, result.output


def check_json(url: str) -> tuple[int, dict[str, Any]]:
    code, output = db_check(url, "--json")
    return code, json.loads(output)


def failing(report: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["detail"] for c in report["checks"] if not c["ok"]}


async def with_deep_request(store: Store) -> str:
    """Store a request nested 250 levels deep and let a list find it (and quarantine it)."""
    async with store:
        request = make_request(thread="t-deep")
        for _ in range(250):
            request.attrs = {"a": request.attrs}
        await store.create_request(request, created_events(request))
        await store.list_requests()
    return request.id


# ---------------------------------------------------------------- SQLite
@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    path = tmp_path / "signoff.db"

    async def create() -> None:
        async with SQLiteStore(path) as store:
            request = make_request()
            await store.create_request(request, created_events(request))

    asyncio.run(create())
    return f"sqlite:///{path}"


def sqlite_path(url: str) -> str:
    return url.removeprefix("sqlite:///")


def test_a_healthy_sqlite_store_passes(sqlite_url: str) -> None:
    code, output = db_check(sqlite_url)
    assert code == 0, output
    assert "healthy" in output and "FAIL" not in output
    code, report = check_json(sqlite_url)
    assert code == 0 and report["ok"] is True
    assert [c["name"] for c in report["checks"]] == [
        "integrity",
        "schema",
        "audit_triggers",
        "quarantine",
    ]
    assert report["version"] == report["supported"] and report["quarantined"] == []


def test_a_dropped_audit_trigger_fails_the_check(sqlite_url: str) -> None:
    with contextlib.closing(sqlite3.connect(sqlite_path(sqlite_url))) as conn:
        conn.execute("DROP TRIGGER audit_no_delete")
        conn.commit()
    code, output = db_check(sqlite_url)
    assert code == 1
    assert "audit_no_delete" in output and "unhealthy" in output
    code, report = check_json(sqlite_url)
    assert code == 1 and list(failing(report)) == ["audit_triggers"]


def test_a_quarantined_row_fails_the_check_until_it_is_cancelled(sqlite_url: str) -> None:
    store = SQLiteStore(sqlite_path(sqlite_url))
    bad = asyncio.run(with_deep_request(store))
    code, report = check_json(sqlite_url)
    assert code == 1 and list(failing(report)) == ["quarantine"]
    assert bad in failing(report)["quarantine"]
    assert [(q["id"], q["status"]) for q in report["quarantined"]] == [(bad, "pending")]
    assert "recursion" in report["quarantined"][0]["reason"]

    async def cancel() -> None:
        async with SQLiteStore(sqlite_path(sqlite_url)) as again:
            await again.cancel_quarantined(bad, actor="ops")

    asyncio.run(cancel())
    code, report = check_json(sqlite_url)
    assert code == 0, report
    assert [(q["id"], q["status"]) for q in report["quarantined"]] == [(bad, "cancelled")]


def test_an_old_schema_fails_the_check_and_is_not_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        for statement in _V1:
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 1")
        conn.commit()
    code, output = db_check(f"sqlite:///{path}")
    assert code == 1 and "signoff db upgrade" in output
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1


@pytest.mark.parametrize("content", [b"not a database at all" * 100, None])
def test_a_damaged_or_missing_file_fails_without_a_traceback(
    tmp_path: Path, content: bytes | None
) -> None:
    path = tmp_path / "signoff.db"
    if content is not None:
        path.write_bytes(content)
    code, output = db_check(f"sqlite:///{path}")
    assert code == 1, output
    assert "Traceback" not in output and "unhealthy" in output
    assert content is not None or not path.exists()  # a check never creates the file


# ---------------------------------------------------------------- PostgreSQL
@pytest.fixture
def pg_setup(pg_url: str) -> Iterator[tuple[str, str, str]]:
    """(owner URL with ?schema=, app role, schema): migrated, the role granted."""
    role, schema = f"app_{secrets.token_hex(4)}", f"chk_{secrets.token_hex(5)}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    url = f"{pg_url}?schema={schema}"
    result = runner.invoke(app, ["db", "upgrade", "--store", url, "--grant", role])
    assert result.exit_code == 0, result.output
    yield url, role, schema
    pg_cluster.drop_schema(pg_url, schema)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def owner(pg_url: str, statement: str, schema: str, role: str = "") -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL(statement).format(s=sql.Identifier(schema), role=sql.Identifier(role or "x"))
        )


def test_a_healthy_postgres_schema_passes(pg_setup: tuple[str, str, str]) -> None:
    url, role, _ = pg_setup
    code, report = check_json(url)
    assert code == 0, report
    names = [c["name"] for c in report["checks"]]
    assert names == ["schema", "audit_triggers", "audit_privileges", "app_roles", "quarantine"]
    app_roles = next(c for c in report["checks"] if c["name"] == "app_roles")
    assert role in app_roles["detail"]


@pytest.mark.parametrize(
    "statement",
    [
        "DROP TRIGGER audit_no_truncate ON {s}.audit",
        "ALTER TABLE {s}.audit DISABLE TRIGGER audit_no_update_or_delete",
    ],
)
def test_a_dropped_or_disabled_audit_trigger_fails(
    pg_url: str, pg_setup: tuple[str, str, str], statement: str
) -> None:
    url, _, schema = pg_setup
    owner(pg_url, statement, schema)
    code, report = check_json(url)
    assert code == 1 and list(failing(report)) == ["audit_triggers"]


def test_a_role_that_may_rewrite_the_audit_log_fails(
    pg_url: str, pg_setup: tuple[str, str, str]
) -> None:
    url, role, schema = pg_setup
    owner(pg_url, "GRANT UPDATE ON {s}.audit TO {role}", schema, role)
    code, report = check_json(url)
    assert code == 1 and list(failing(report)) == ["audit_privileges"]
    assert f"{role}: UPDATE" in failing(report)["audit_privileges"]


def test_an_app_role_missing_a_grant_fails(pg_url: str, pg_setup: tuple[str, str, str]) -> None:
    url, role, schema = pg_setup
    owner(pg_url, "REVOKE INSERT ON {s}.outbox FROM {role}", schema, role)
    code, output = db_check(url)
    assert code == 1
    assert f"{role} lacks INSERT on outbox" in output and "--grant" in output


def test_a_quarantined_row_fails_the_postgres_check(
    pg_url: str, pg_setup: tuple[str, str, str]
) -> None:
    url, _, schema = pg_setup
    bad = asyncio.run(with_deep_request(PostgresStore(pg_url, schema=schema)))
    code, report = check_json(url)
    assert code == 1 and list(failing(report)) == ["quarantine"]
    assert [q["id"] for q in report["quarantined"]] == [bad]


def test_a_missing_postgres_schema_fails(pg_url: str) -> None:
    code, output = db_check(f"{pg_url}?schema=nothing_{secrets.token_hex(3)}")
    assert code == 1 and "signoff db upgrade" in output


def test_an_unreadable_row_nobody_has_read_yet_is_found_but_not_marked(sqlite_url: str) -> None:
    path = sqlite_path(sqlite_url)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        (rid,) = conn.execute("SELECT id FROM requests").fetchone()
        conn.execute("UPDATE requests SET doc = '{}' WHERE id = ?", (rid,))
        conn.commit()
    code, report = check_json(sqlite_url)
    assert code == 1 and list(failing(report)) == ["quarantine"]
    assert [(q["id"], q["quarantined_at"]) for q in report["quarantined"]] == [(rid, None)]
    with contextlib.closing(sqlite3.connect(path)) as conn:
        marks = conn.execute("SELECT count(*) FROM requests WHERE quarantined_at IS NOT NULL")
        assert marks.fetchone()[0] == 0


def test_an_unreadable_postgres_row_nobody_has_read_yet_is_found(
    pg_url: str, pg_setup: tuple[str, str, str]
) -> None:
    url, _, schema = pg_setup

    async def create() -> str:
        async with PostgresStore(pg_url, schema=schema) as store:
            request = make_request()
            await store.create_request(request, created_events(request))
            return request.id

    rid = asyncio.run(create())
    owner(pg_url, "UPDATE {s}.requests SET doc = '{{}}'::json", schema)
    code, report = check_json(url)
    assert code == 1 and [q["id"] for q in report["quarantined"]] == [rid]
