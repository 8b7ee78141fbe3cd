"""Secrets never in clear outside the row that runs — read straight from each backend's
tables (memory, SQLite file, PostgreSQL schema), not through signoff."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from signoff import Gate, Policy, ToolCall
from signoff.model import ApprovalRequest
from signoff.policy.redact import digest
from signoff.store import MemoryStore, SQLiteStore, Store
from signoff.store.postgres import PostgresStore
from tests.store.conftest import Backend

pytestmark = pytest.mark.asyncio

POLICY = textwrap.dedent(
    """
    version: 1
    people:
      alice: {roles: [ops]}
      erin: {roles: []}
    tools:
      deploy:
        default: require_approval
        approvers: {roles: [ops]}
        allowed_decisions: [approve, edit, reject]
        editable_args: "*"
    """
)
LIVE = "sk-LIVE-4f9a0c2e"
ARGS = {"version": "v1", "api_key": LIVE, "cfg": {"password": "hunter2-pw", "host": "db"}}


def stored_text(store: Store) -> str:
    """Every request row and audit row, as the backend keeps them."""
    if isinstance(store, SQLiteStore):
        with sqlite3.connect(store.path) as conn:
            rows = conn.execute("SELECT doc FROM requests").fetchall()
            rows += conn.execute("SELECT data FROM audit").fetchall()
        return "\n".join(str(r[0]) for r in rows)
    if isinstance(store, PostgresStore):
        s = sql.Identifier(store.schema)
        with psycopg.connect(store.dsn, autocommit=True) as conn:
            rows = conn.execute(sql.SQL("SELECT doc::text FROM {}.requests").format(s)).fetchall()
            rows += conn.execute(sql.SQL("SELECT data::text FROM {}.audit").format(s)).fetchall()
        return "\n".join(str(r[0]) for r in rows)
    assert isinstance(store, MemoryStore)
    docs = [r.model_dump_json() for r in store._requests.values()]
    return "\n".join(docs + [json.dumps(r.data) for r in store.sealed_rows()])


async def ask(gate: Gate) -> ApprovalRequest:
    ctx = gate.make_context("erin", thread="t-secrets", agent="bot")
    sub = await gate.asubmit([ToolCall("deploy", dict(ARGS), id="call-1")], ctx)
    assert sub.request is not None
    return sub.request


async def test_a_rejected_call_leaves_no_secret_in_the_row_or_the_audit(store: Store) -> None:
    gate = Gate(Policy.from_yaml(POLICY), store)
    await gate.astart()
    req = await ask(gate)
    await gate.store.flush_audit()
    row = stored_text(store)
    assert LIVE in row  # the window: the row keeps it while the call can still run ...
    assert LIVE not in row.split("\n", 1)[1]  # ... the audit (every line after it) never
    await gate.adecide(req.id, [{"type": "reject", "message": "no"}], approver="alice")
    await gate.store.flush_audit()
    after = stored_text(store)
    assert LIVE not in after and "hunter2-pw" not in after
    stored = await gate.get(req.id)
    assert stored.action_requests[0].args["api_key"] == {"redacted": gate.redaction.digest(LIVE)}
    assert stored.action_requests[0].args["cfg"]["host"] == "db"
    await gate.aclose()


async def test_an_executed_call_is_sealed_after_it_ran_with_the_real_values(store: Store) -> None:
    gate = Gate(Policy.from_yaml(POLICY), store)
    await gate.astart()
    req = await ask(gate)
    req = await gate.adecide(req.id, [{"type": "approve"}], approver="alice")
    seen: list[dict[str, object]] = []

    async def run(final: dict[str, object]) -> str:
        seen.append(final)
        return "ok"

    await gate.arun_approved(req, "call-1", run)
    await gate.store.flush_audit()
    assert seen == [ARGS]
    text = stored_text(store)
    assert LIVE not in text and "hunter2-pw" not in text
    await gate.aclose()


async def test_the_redaction_salt_is_random_per_store_and_kept_across_reopen(
    backend: Backend, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    first = backend.make(tmp_path, request)
    await first.open()
    salt = await first.redaction_salt()
    again = await backend.reopen(first)
    assert len(salt) == 32 and await again.redaction_salt() == salt
    (tmp_path / "other").mkdir()
    other = backend.make(tmp_path / "other", request)
    await other.open()
    assert await other.redaction_salt() != salt
    for opened in {id(first): first, id(again): again, id(other): other}.values():
        await opened.close()
        backend.cleanup(opened)


async def test_digests_are_keyed_with_the_audit_key_when_one_is_configured(
    sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("T_SECRETS_AUDIT_KEY", "a" * 32)
    policy = Policy.from_yaml(POLICY + "audit: {key: '${T_SECRETS_AUDIT_KEY}'}\n")
    gate = Gate(policy, sqlite_store)
    await gate.astart()
    req = await ask(gate)
    await gate.adecide(req.id, [{"type": "reject"}], approver="alice")
    stored = await gate.get(req.id)
    assert stored.calls[0].action.args["api_key"] == {"redacted": digest(LIVE, b"a" * 32)}
    await gate.aclose()
