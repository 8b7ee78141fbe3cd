"""A store on real SQLite or real PostgreSQL, and an attacker with direct write access to it.

:class:`Tamper` is what someone holding the database file (SQLite) or a superuser/owner login
(PostgreSQL) can do behind signoff's back: drop the append-only triggers, edit, delete and
insert audit rows, rewrite ``audit_head``, edit request rows.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from signoff.model import AuditRecord
from signoff.store import SQLiteStore, Store
from signoff.store.audit import canonical_json, record_fields
from signoff.store.postgres import PostgresStore
from tests.store import pg_cluster
from tests.store.conftest import pg_url  # noqa: F401  (the run's throwaway PostgreSQL)

KEY = b"k" * 32
_TABLES = ("audit", "audit_head", "requests", "call_keys", "outbox")
_COLUMNS = (
    "seq, event, at, request_id, thread, tool, tool_call_id, actor, principal, agent, rule, "
    "policy_hash, data, prev_hash, hash"
)


class Tamper:
    """Direct writes to the store's tables, bypassing signoff."""

    def __init__(self, run: Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]], pg: bool):
        self._run = run
        self.pg = pg

    def q(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        """``statement`` with ``?`` placeholders and table names in braces (``{audit}``)."""
        return self._run(statement, params)

    def triggers(self) -> set[str]:
        if self.pg:
            rows = self.q(
                "SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = {schema} "
                "AND c.relname = 'audit' AND NOT t.tgisinternal AND t.tgenabled <> 'D'"
            )
        else:
            rows = self.q(
                "SELECT name FROM sqlite_master WHERE type='trigger' AND tbl_name='audit'"
            )
        return {name for (name,) in rows}

    def drop_triggers(self) -> None:
        for name in self.triggers():
            self.q(f"DROP TRIGGER {name}" + (" ON {audit}" if self.pg else ""))

    def set_actor(self, seq: int, actor: str) -> None:
        self.q("UPDATE {audit} SET actor = ? WHERE seq = ?", actor, seq)

    def delete_rows(self, *seqs: int) -> None:
        for seq in seqs:
            self.q("DELETE FROM {audit} WHERE seq = ?", seq)

    def delete_after(self, seq: int) -> None:
        """Delete every row after ``seq`` and point the head there (so later appends fit)."""
        self.q("DELETE FROM {audit} WHERE seq > ?", seq)
        if self.pg:
            self.q(
                "UPDATE {audit_head} SET seq = ?, hash = (SELECT hash FROM {audit} WHERE seq = ?)",
                seq,
                seq,
            )

    def replace_chain(self, records: list[AuditRecord]) -> None:
        """Swap the whole log for ``records`` (a chain sealed from genesis)."""
        self.q("DELETE FROM {audit}")
        marks = ", ".join("?" for _ in range(15))
        for record in records:
            row = record_fields(record)
            row["data"] = canonical_json(row["data"])
            self.q(f"INSERT INTO {{audit}} ({_COLUMNS}) VALUES ({marks})", *row.values())
        if self.pg:
            last = records[-1]
            self.q("UPDATE {audit_head} SET seq = ?, hash = ?", last.seq, last.hash)

    def edit_request(self, request_id: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Edit a request row's document (what `signoff show` and the agents read)."""
        (doc,) = self.q("SELECT doc FROM {requests} WHERE id = ?", request_id)[0]
        data = json.loads(doc) if isinstance(doc, str) else doc
        change(data)
        self.q(
            "UPDATE {requests} SET doc = ?, status = ? WHERE id = ?",
            json.dumps(data),
            data["status"],
            request_id,
        )


def sqlite_tamper(path: Path) -> Tamper:
    def run(statement: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        text = statement.format(**{t: t for t in _TABLES})
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
            return conn.execute(text, params).fetchall()

    return Tamper(run, pg=False)


def pg_tamper(url: str, schema: str) -> Tamper:
    def run(statement: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        text = sql.SQL(statement.replace("%", "%%").replace("?", "%s")).format(
            schema=sql.Literal(schema),
            **{
                t: sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(t))
                for t in _TABLES
            },
        )
        with psycopg.connect(url, autocommit=True) as conn:
            cur = conn.execute(text, params)
            return cur.fetchall() if cur.description else []

    return Tamper(run, pg=True)


class Backend:
    """Opens the store under test again (a new process would), and tampers with it."""

    def __init__(self, name: str, tmp: Path, url: str | None) -> None:
        self.name = name
        self.tmp = tmp
        self.url = url
        self.schema = f"t_{secrets.token_hex(6)}"
        self.tamper = pg_tamper(url, self.schema) if url else sqlite_tamper(tmp / "signoff.db")

    def store(self) -> Store:
        if self.url:
            return PostgresStore(self.url, schema=self.schema, pool_max=4)
        return SQLiteStore(self.tmp / "signoff.db")


@pytest.fixture(params=["sqlite", "postgresql"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    made = Backend(request.param, tmp_path, url)
    yield made
    if url:
        pg_cluster.drop_schema(url, made.schema)
