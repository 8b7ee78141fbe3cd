"""The notification outbox contract (``Outbox`` / ``OutboxStore`` in signoff/store/base.py).

Run against every built-in backend: memory, SQLite and PostgreSQL (a schema of its own on
the throwaway cluster of :mod:`tests.store.pg_cluster`).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sqlite3
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg import sql as psycopg_sql

from signoff.model import AuditEvent, utcnow
from signoff.store import AuditQuery, MemoryStore, SQLiteStore
from signoff.store._sqlite_schema import _V1, SCHEMA_VERSION
from signoff.store.base import OutboxItem, OutboxStore
from signoff.store.postgres import PostgresStore
from tests.store import pg_cluster
from tests.store.factories import created_events, make_request

pytestmark = pytest.mark.asyncio


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
async def outbox_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[OutboxStore]:
    store: OutboxStore
    if request.param == "memory":
        store = MemoryStore()
    elif request.param == "sqlite":
        store = SQLiteStore(tmp_path / "signoff.db")
    else:
        url = request.getfixturevalue("pg_url")
        store = PostgresStore(url, schema=f"t_{secrets.token_hex(6)}", pool_max=4)
    await store.open()
    yield store
    await store.close()
    if isinstance(store, PostgresStore):
        pg_cluster.drop_schema(store.dsn, store.schema)


def item(
    request_id: str,
    name: str,
    *,
    kind: str = "prompt",
    channel: str = "slack",
    at: datetime | None = None,
) -> OutboxItem:
    return OutboxItem(
        id=f"ob_{request_id}_{name}",
        request_id=request_id,
        channel=channel,
        kind=kind,  # type: ignore[arg-type]
        recipient=f"U-{name}",
        person=name,
        next_at=at or utcnow(),
        data={"note": name},
    )


async def stored(store: OutboxStore, *items_for: str, **kw: object) -> str:
    request = make_request(**kw)  # type: ignore[arg-type]
    rows = [item(request.id, name) for name in items_for]
    await store.create_request(request, created_events(request), outbox=rows)
    return request.id


# ---------------------------------------------------------------- writing
async def test_backends_implement_the_outbox_protocol(outbox_store: OutboxStore) -> None:
    assert isinstance(outbox_store, OutboxStore)


async def test_create_request_writes_its_outbox_rows_with_it(outbox_store: OutboxStore) -> None:
    rid = await stored(outbox_store, "alice", "bob")
    rows = await outbox_store.outbox_for(rid)
    assert sorted(r.person or "" for r in rows) == ["alice", "bob"]
    assert {r.status for r in rows} == {"pending"}
    assert rows[0].data in ({"note": "alice"}, {"note": "bob"})


async def test_an_idempotent_repeat_of_create_writes_no_outbox_rows(
    outbox_store: OutboxStore,
) -> None:
    request = make_request()
    await outbox_store.create_request(
        request, created_events(request), outbox=[item(request.id, "alice")]
    )
    again = request.model_copy(update={"id": "req_other"})
    _, created = await outbox_store.create_request(
        again, created_events(again), outbox=[item(request.id, "mallory")]
    )
    assert created is False
    assert [r.person for r in await outbox_store.outbox_for(request.id)] == ["alice"]


async def test_enqueue_ignores_ids_already_stored(outbox_store: OutboxStore) -> None:
    rid = await stored(outbox_store, "alice")
    added = await outbox_store.enqueue_outbox([item(rid, "alice"), item(rid, "bob")])
    assert added == 1
    assert len(await outbox_store.outbox_for(rid)) == 2


# ---------------------------------------------------------------- claiming
async def test_claim_leases_due_rows_oldest_first(outbox_store: OutboxStore) -> None:
    now = utcnow()
    rid = await stored(outbox_store)
    await outbox_store.enqueue_outbox(
        [
            item(rid, "late", at=now - timedelta(seconds=1)),
            item(rid, "early", at=now - timedelta(seconds=5)),
            item(rid, "future", at=now + timedelta(minutes=5)),
        ]
    )
    claimed = await outbox_store.claim_outbox(now, limit=10, lease_s=30)
    assert [c.person for c in claimed] == ["early", "late"]
    assert all(c.status == "sending" and c.attempts == 1 for c in claimed)
    assert all(c.lease_until == now + timedelta(seconds=30) for c in claimed)


async def test_claim_respects_the_limit(outbox_store: OutboxStore) -> None:
    await stored(outbox_store, "a", "b", "c")
    assert len(await outbox_store.claim_outbox(utcnow(), limit=2)) == 2
    assert len(await outbox_store.claim_outbox(utcnow(), limit=2)) == 1


async def test_a_leased_row_is_not_claimed_again_until_the_lease_ends(
    outbox_store: OutboxStore,
) -> None:
    await stored(outbox_store, "alice")
    now = utcnow()
    assert len(await outbox_store.claim_outbox(now, lease_s=60)) == 1
    assert await outbox_store.claim_outbox(now + timedelta(seconds=59)) == []
    again = await outbox_store.claim_outbox(now + timedelta(seconds=61))
    assert len(again) == 1 and again[0].attempts == 2


async def test_claim_can_be_limited_to_channels(outbox_store: OutboxStore) -> None:
    rid = await stored(outbox_store)
    await outbox_store.enqueue_outbox(
        [item(rid, "a", channel="slack"), item(rid, "b", channel="email")]
    )
    claimed = await outbox_store.claim_outbox(utcnow(), channels=["email"])
    assert [c.channel for c in claimed] == ["email"]
    assert await outbox_store.claim_outbox(utcnow(), channels=[]) == []


async def test_concurrent_claims_never_hand_one_row_to_two_workers(
    outbox_store: OutboxStore,
) -> None:
    rid = await stored(outbox_store)
    await outbox_store.enqueue_outbox([item(rid, f"p{i}") for i in range(40)])
    batches = await asyncio.gather(
        *(outbox_store.claim_outbox(utcnow(), limit=3) for _ in range(20))
    )
    ids = [c.id for batch in batches for c in batch]
    assert len(ids) == len(set(ids)) == 40


# ---------------------------------------------------------------- finishing
async def test_complete_keeps_the_provider_reference(outbox_store: OutboxStore) -> None:
    rid = await stored(outbox_store, "alice")
    [claimed] = await outbox_store.claim_outbox(utcnow())
    await outbox_store.complete_outbox(claimed.id, ref={"channel": "D1", "ts": "1.2"})
    [row] = await outbox_store.outbox_for(rid)
    assert row.status == "sent" and row.ref == {"channel": "D1", "ts": "1.2"}
    assert row.lease_until is None
    assert await outbox_store.claim_outbox(utcnow() + timedelta(hours=1)) == []


async def test_a_failed_row_keeps_its_error_and_is_not_claimed(outbox_store: OutboxStore) -> None:
    rid = await stored(outbox_store, "alice")
    [claimed] = await outbox_store.claim_outbox(utcnow())
    await outbox_store.complete_outbox(claimed.id, status="failed", error="HTTP 404")
    [row] = await outbox_store.outbox_for(rid)
    assert (row.status, row.error) == ("failed", "HTTP 404")
    assert await outbox_store.claim_outbox(utcnow() + timedelta(hours=1)) == []


def notified(request_id: str, **data: object) -> AuditEvent:
    return AuditEvent(
        event="notified", request_id=request_id, actor="slack", data={"to": "alice", **data}
    )


async def test_complete_writes_its_audit_event_in_the_same_step(outbox_store: OutboxStore) -> None:
    rid = await stored(outbox_store, "alice")
    [claimed] = await outbox_store.claim_outbox(utcnow())
    await outbox_store.complete_outbox(claimed.id, ref={"ts": "1"}, audit=[notified(rid)])
    [row] = await outbox_store.outbox_for(rid)
    assert row.status == "sent"
    await outbox_store.flush_audit()
    events = await outbox_store.read_audit(AuditQuery(request_id=rid))
    assert [e.event for e in events][-1] == "notified"
    assert (await outbox_store.verify_audit()).ok


@contextlib.contextmanager
def audit_refused(store: OutboxStore) -> Iterator[None]:
    """The audit log refuses every insert: a trigger in the real database (SQLite,
    PostgreSQL), the append itself for the memory store."""
    if isinstance(store, MemoryStore):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(store, "_append_locked", _refuse)
            yield
    elif isinstance(store, SQLiteStore):
        with sqlite3.connect(store.path) as conn:
            conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON audit "
                "BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
        yield
        with sqlite3.connect(store.path) as conn:
            conn.execute("DROP TRIGGER refuse")
    else:
        assert isinstance(store, PostgresStore)
        s = psycopg_sql.Identifier(store.schema)
        with psycopg.connect(store.dsn, autocommit=True) as conn:
            conn.execute(
                psycopg_sql.SQL(
                    "CREATE TRIGGER refuse BEFORE INSERT ON {}.audit "
                    "FOR EACH ROW EXECUTE FUNCTION {}.audit_refuse()"
                ).format(s, s)
            )
            yield
            conn.execute(psycopg_sql.SQL("DROP TRIGGER refuse ON {}.audit").format(s))


def _refuse(events: object) -> None:
    raise RuntimeError("refused")


async def test_an_audit_event_that_cannot_be_written_leaves_the_row_as_it_was(
    outbox_store: OutboxStore,
) -> None:
    """Both or neither: the row stays ``sending`` (its lease ends, another worker retries),
    never ``sent`` without its ``notified`` event."""
    rid = await stored(outbox_store, "alice")
    [claimed] = await outbox_store.claim_outbox(utcnow())
    await outbox_store.flush_audit()
    before = len(await outbox_store.read_audit(AuditQuery(request_id=rid)))
    with audit_refused(outbox_store), pytest.raises(Exception, match="refused"):
        await outbox_store.complete_outbox(claimed.id, ref={"ts": "1"}, audit=[notified(rid)])
    [row] = await outbox_store.outbox_for(rid)
    assert row.status == "sending" and row.ref is None
    await outbox_store.complete_outbox(claimed.id, ref={"ts": "1"}, audit=[notified(rid)])
    [row] = await outbox_store.outbox_for(rid)
    assert row.status == "sent"
    await outbox_store.flush_audit()
    events = await outbox_store.read_audit(AuditQuery(request_id=rid))
    assert [e.event for e in events[before:]] == ["notified"]
    assert (await outbox_store.verify_audit()).ok


async def test_retry_gives_the_row_back_until_next_at(outbox_store: OutboxStore) -> None:
    rid = await stored(outbox_store, "alice")
    now = utcnow()
    [claimed] = await outbox_store.claim_outbox(now)
    await outbox_store.retry_outbox(
        claimed.id, next_at=now + timedelta(seconds=10), error="HTTP 503"
    )
    [row] = await outbox_store.outbox_for(rid)
    assert (row.status, row.error, row.attempts) == ("pending", "HTTP 503", 1)
    assert await outbox_store.claim_outbox(now + timedelta(seconds=9)) == []
    [again] = await outbox_store.claim_outbox(now + timedelta(seconds=10))
    assert again.attempts == 2


async def test_cancel_for_a_request_cancels_only_its_pending_prompts(
    outbox_store: OutboxStore,
) -> None:
    rid = await stored(outbox_store, "alice", "bob")
    other = await stored(outbox_store, "carol", thread="thread-2")
    await outbox_store.enqueue_outbox(
        [item(rid, "upd", kind="update"), item(rid, "evt", kind="event", channel="webhooks")]
    )
    [sending] = await outbox_store.claim_outbox(utcnow(), limit=1)
    cancelled = await outbox_store.cancel_outbox_for(rid)
    rows = {r.person: r.status for r in await outbox_store.outbox_for(rid)}
    assert cancelled == 1
    assert rows[sending.person] == "sending"  # its worker checks the request before sending
    assert rows["upd"] == "pending" and rows["evt"] == "pending"
    assert sorted(rows.values()).count("cancelled") == 1
    assert [r.status for r in await outbox_store.outbox_for(other)] == ["pending"]


async def test_next_outbox_at_is_the_earliest_due_time(outbox_store: OutboxStore) -> None:
    now = utcnow()
    assert await outbox_store.next_outbox_at() is None
    rid = await stored(outbox_store)
    await outbox_store.enqueue_outbox(
        [
            item(rid, "a", at=now + timedelta(seconds=30)),
            item(rid, "b", at=now + timedelta(seconds=20), channel="email"),
        ]
    )
    assert await outbox_store.next_outbox_at() == now + timedelta(seconds=20)
    assert await outbox_store.next_outbox_at(["slack"]) == now + timedelta(seconds=30)
    await outbox_store.claim_outbox(now + timedelta(seconds=25), lease_s=60)
    assert await outbox_store.next_outbox_at() == now + timedelta(seconds=30)
    assert await outbox_store.next_outbox_at(["email"]) == now + timedelta(seconds=85)


# ---------------------------------------------------------------- SQLite only
async def test_outbox_rows_survive_reopening_the_file(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "s.db") as first:
        rid = await stored(first, "alice")
        await first.claim_outbox(utcnow(), lease_s=0.0)
    async with SQLiteStore(tmp_path / "s.db") as second:
        [row] = await second.claim_outbox(utcnow() + timedelta(seconds=1))
        assert row.request_id == rid and row.attempts == 2


async def test_two_store_instances_on_one_file_never_claim_one_row_twice(
    tmp_path: Path,
) -> None:
    async with SQLiteStore(tmp_path / "s.db") as a, SQLiteStore(tmp_path / "s.db") as b:
        rid = await stored(a)
        await a.enqueue_outbox([item(rid, f"p{i}") for i in range(30)])
        batches = await asyncio.gather(*(s.claim_outbox(utcnow(), limit=4) for s in (a, b) * 6))
    ids = [c.id for batch in batches for c in batch]
    assert len(ids) == len(set(ids)) == 30


async def test_a_version_1_database_gains_the_outbox_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        for statement in _V1:
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 1")
    async with SQLiteStore(path) as store:
        rid = await stored(store, "alice")
        assert len(await store.outbox_for(rid)) == 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 2
