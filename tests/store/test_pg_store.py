"""What only the PostgreSQL backend promises: schema and migrations, the append-only audit
log, one-statement changes with their NOTIFY, the shared sweeper, and the database clock."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
from psycopg import sql

from signoff.model import (
    ApprovalRequest,
    AuditEvent,
    IdempotencyConflict,
    StoreError,
    Transition,
    utcnow,
)
from signoff.model.resolution import apply_decisions, cancel
from signoff.store import AuditQuery
from signoff.store._pg_audit import entry
from signoff.store._pg_schema import SCHEMA_VERSION
from signoff.store.audit import GENESIS_HASH, canonical_json, seal
from signoff.store.postgres import PostgresStore
from tests.store import pg_cluster
from tests.store.factories import created_events, decide, decision, make_request
from tests.store.pg_worker import expire


def raw(url: str) -> psycopg.Connection[tuple[object, ...]]:
    """A connection behind the store's back (superuser), as an insider's script would use."""
    return psycopg.connect(url, autocommit=True)


def q(store: PostgresStore, text: str) -> sql.Composed:
    return sql.SQL(text).format(s=sql.Identifier(store.schema))


async def stored(store: PostgresStore, **kw: object) -> ApprovalRequest:
    request = make_request(**kw)  # type: ignore[arg-type]
    await store.create_request(request, created_events(request))
    return request


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    name = f"t_{secrets.token_hex(6)}"
    yield name
    pg_cluster.drop_schema(pg_url, name)


# ---------------------------------------------------------------- schema and migrations
async def test_open_creates_the_schema_once(pg_url: str, schema: str) -> None:
    async with PostgresStore(pg_url, schema=schema) as first:
        assert first.migrations_applied == list(range(1, SCHEMA_VERSION + 1))
    async with PostgresStore(pg_url, schema=schema) as again:
        assert again.migrations_applied == []


async def test_replicas_starting_together_migrate_exactly_once(pg_url: str, schema: str) -> None:
    stores = [PostgresStore(pg_url, schema=schema) for _ in range(6)]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        applied = sorted(len(s.migrations_applied) for s in stores)
        assert applied == [0] * 5 + [SCHEMA_VERSION]
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def test_a_newer_schema_version_is_refused(pg_url: str, schema: str) -> None:
    async with PostgresStore(pg_url, schema=schema) as store:
        with raw(pg_url) as conn:
            conn.execute(q(store, "INSERT INTO {s}.schema_migrations (version) VALUES (99)"))
    newer = PostgresStore(pg_url, schema=schema)
    with pytest.raises(StoreError, match="upgrade signoff on every replica"):
        await newer.open()
    await newer.close()


async def test_an_unreachable_database_fails_closed_with_a_clear_error() -> None:
    port = pg_cluster.free_port()  # nothing listens there
    store = PostgresStore(f"postgresql://nobody@127.0.0.1:{port}/x", timeout_s=1)
    with pytest.raises(StoreError, match="cannot connect"):
        await store.get_request("req_1")
    await store.close()


async def test_wrong_credentials_are_named_and_the_password_is_not(pg_url: str) -> None:
    url = pg_url.replace("postgres@", "nobody:hunter2@")
    store = PostgresStore(url, timeout_s=2)
    with pytest.raises(StoreError, match="nobody") as caught:
        await store.open()
    assert "hunter2" not in str(caught.value)
    await store.close()


async def test_listen_and_migrations_use_the_direct_address(pg_url: str, schema: str) -> None:
    """Behind a transaction-pooling PgBouncer, LISTEN and the migration lock must reach
    PostgreSQL itself: ``direct_port`` is where those connect (here: nothing listens)."""
    nowhere = PostgresStore(pg_url, schema=schema, direct_port=pg_cluster.free_port())
    with pytest.raises(StoreError, match="cannot connect"):
        await nowhere.open()
    await nowhere.close()
    port = int(pg_url.rsplit(":", 1)[1].split("/")[0])
    async with PostgresStore(pg_url, schema=schema, direct_port=port) as direct:
        request = await stored(direct)
        waiter = asyncio.create_task(direct.wait(request.id, timeout=30))
        async with PostgresStore(pg_url, schema=schema) as other:
            for _ in range(500):
                if direct.stats()["listening"]:
                    break
                await asyncio.sleep(0.01)
            await decide(other, request.id, decision(approver="alice"))
        assert (await waiter).status == "resolved"


async def test_a_closed_store_refuses_work(pg_store: PostgresStore) -> None:
    await pg_store.close()
    await pg_store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        await pg_store.get_request("x")
    with pytest.raises(StoreError, match="closed"):
        pg_store.audit_nowait(AuditEvent(event="allowed"))


async def test_sweeper_query_can_use_the_partial_due_index(pg_store: PostgresStore) -> None:
    await stored(pg_store)
    with raw(pg_store.dsn) as conn:
        conn.execute("SET enable_seqscan = off")
        plan = conn.execute(
            q(
                pg_store,
                "EXPLAIN SELECT id FROM {s}.requests WHERE status = 'pending' "
                "AND quarantined_at IS NULL AND due_at <= now() ORDER BY due_at LIMIT 10",
            )
        ).fetchall()
    assert "requests_due" in " ".join(str(row[0]) for row in plan)


# ---------------------------------------------------------------- append-only audit
@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE {s}.audit SET actor = 'mallory' WHERE seq = 2",
        "DELETE FROM {s}.audit WHERE seq = 1",
        "TRUNCATE {s}.audit",
    ],
)
async def test_audit_rows_refuse_change_even_for_a_superuser(
    pg_store: PostgresStore, statement: str
) -> None:
    request = await stored(pg_store)
    await decide(pg_store, request.id, decision(approver="alice"))
    with raw(pg_store.dsn) as conn, pytest.raises(psycopg.Error, match="append-only"):
        conn.execute(q(pg_store, statement))
    assert (await pg_store.verify_audit()).ok


async def test_the_owner_role_has_no_update_delete_or_truncate_privilege(
    pg_url: str, schema: str
) -> None:
    role = f"owner_{secrets.token_hex(4)}"
    with raw(pg_url) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(
            sql.SQL("GRANT CREATE ON DATABASE postgres TO {}").format(sql.Identifier(role))
        )
    try:
        as_owner = pg_url.replace("postgres@", f"{role}@", 1)
        async with PostgresStore(as_owner, schema=schema) as store:
            await stored(store)
        with psycopg.connect(as_owner, autocommit=True) as conn:
            for statement in ("UPDATE {s}.audit SET actor = 'x'", "DELETE FROM {s}.audit"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission"):
                    conn.execute(sql.SQL(statement).format(s=sql.Identifier(schema)))
    finally:
        with raw(pg_url) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
            conn.execute(
                sql.SQL("REVOKE CREATE ON DATABASE postgres FROM {}").format(sql.Identifier(role))
            )
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


async def test_an_edit_past_the_triggers_is_reported_by_verify(pg_store: PostgresStore) -> None:
    request = await stored(pg_store)
    await decide(pg_store, request.id, decision(approver="alice"))
    with raw(pg_store.dsn) as conn:
        conn.execute("SET session_replication_role = replica")  # what a superuser could do
        conn.execute(
            q(pg_store, """UPDATE {s}.audit SET data = '{{"type":"reject"}}' WHERE seq = 2""")
        )
    verification = await pg_store.verify_audit()
    assert (verification.ok, verification.broken_seq) == (False, 2)
    assert "hash mismatch" in (verification.problem or "")


def test_the_cut_canonical_json_hashes_like_the_python_chain() -> None:
    at = utcnow()
    event = AuditEvent(
        event="decided",
        at=at,
        request_id="r\u00e9q",
        actor='a"b',
        data={"z": [1, 2.5, None], "a": {"\u2603": at}},
    )
    sealed = seal(event, 41, "f" * 64)
    cut = entry(event)
    text = cut["p"] + "f" * 64 + cut["m"] + "41" + cut["s"]
    body = {k: v for k, v in sealed.to_wire().items() if k != "hash"}
    body["at"] = cut["at"]
    assert text == canonical_json(body)


async def test_the_chain_continues_across_stores_and_batches(
    pg_store: PostgresStore, second: PostgresStore
) -> None:
    for i in range(30):
        (pg_store if i % 2 else second).audit_nowait(AuditEvent(event="allowed", data={"i": i}))
        await (second if i % 3 else pg_store).append_audit([AuditEvent(event="denied")])
    await pg_store.flush_audit()
    await second.flush_audit()
    rows = await pg_store.read_audit(AuditQuery(limit=100))
    assert [r.seq for r in rows] == list(range(1, 61))
    assert rows[0].prev_hash == GENESIS_HASH
    assert (await pg_store.verify_audit()).ok


# ---------------------------------------------------------------- one statement, with NOTIFY
async def test_every_state_change_is_notified_with_id_and_event_only(
    pg_store: PostgresStore,
) -> None:
    listener = await psycopg.AsyncConnection.connect(pg_store.dsn, autocommit=True)
    await listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(pg_store.channel)))
    secret_args = {"to": "ceo@example.com", "api_key": "sk-very-secret"}
    quorum = await stored(pg_store, calls=(("c1", "send_email", secret_args),), quorum=2)
    await decide(pg_store, quorum.id, decision("c1", approver="alice"))
    await decide(pg_store, quorum.id, decision("c1", approver="bob"))
    gone = await stored(pg_store, calls=(("c2", "t", {}),), timeout_s=60)
    await pg_store.update_request(gone.id, expire(gone.expires_at))
    stopped = await stored(pg_store, calls=(("c3", "t", {}),))
    await pg_store.update_request(
        stopped.id, lambda r: cancel(r, actor="owner", reason=None, now=utcnow())
    )
    notes = [json.loads(n.payload) async for n in listener.notifies(timeout=0.5)]
    await listener.close()
    assert [(n["id"], n["event"]) for n in notes] == [
        (quorum.id, "created"),
        (quorum.id, "decided"),
        (quorum.id, "resolved"),
        (gone.id, "created"),
        (gone.id, "expired"),
        (stopped.id, "created"),
        (stopped.id, "cancelled"),
    ]
    assert all(set(n) == {"id", "event", "origin", "seq", "terminal"} for n in notes)
    assert [n["terminal"] for n in notes] == [False, False, True, False, True, False, True]
    assert "sk-very-secret" not in json.dumps(notes) and "ceo@" not in json.dumps(notes)
    top = (await pg_store.read_audit(AuditQuery(limit=100)))[-1].seq
    assert notes[-1]["seq"] == top


async def test_a_failed_decision_writes_and_notifies_nothing(pg_store: PostgresStore) -> None:
    request = await stored(pg_store)
    await decide(pg_store, request.id, decision(approver="alice"))
    before = await pg_store.read_audit()
    listener = await psycopg.AsyncConnection.connect(pg_store.dsn, autocommit=True)
    await listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(pg_store.channel)))
    with pytest.raises(Exception, match="already"):
        await decide(pg_store, request.id, decision(type="reject", approver="bob"))
    assert [n async for n in listener.notifies(timeout=0.2)] == []
    await listener.close()
    assert await pg_store.read_audit() == before


async def test_a_caller_giving_up_does_not_cut_its_decision_short(
    pg_store: PostgresStore,
) -> None:
    """A client that hangs up mid-decision: the write finishes and waiters hear of it."""
    from tests.store.test_pg_wake import parked

    request = await stored(pg_store)
    waiter = await parked(pg_store, request.id)

    def slow_decision(req: ApprovalRequest) -> Transition:
        time.sleep(0.3)  # the caller is cancelled meanwhile
        return apply_decisions(req, [decision(approver="alice")], approver_roles=(), now=utcnow())

    caller = asyncio.create_task(pg_store.update_request(request.id, slow_decision))
    await asyncio.sleep(0.1)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert (await asyncio.wait_for(waiter, 10)).status == "resolved"
    assert [r.event for r in await pg_store.read_audit()][-2:] == ["decided", "resolved"]


async def test_concurrent_identical_submissions_store_one_request(
    pg_store: PostgresStore, second: PostgresStore
) -> None:
    attempts = [make_request(thread="t-same") for _ in range(10)]
    results = await asyncio.gather(
        *(
            (pg_store if i % 2 else second).create_request(r, created_events(r))
            for i, r in enumerate(attempts)
        )
    )
    assert sum(created for _, created in results) == 1
    assert len({stored_request.id for stored_request, _ in results}) == 1
    assert len(await pg_store.read_audit(AuditQuery(event="created"))) == 1


async def test_reusing_a_request_id_is_refused_after_the_one_statement_insert(
    pg_store: PostgresStore,
) -> None:
    first = await stored(pg_store)
    other = make_request(request_id=first.id, thread="elsewhere", calls=(("x", "t", {}),))
    with pytest.raises(IdempotencyConflict, match="already used"):
        await pg_store.create_request(other, created_events(other))
    assert await pg_store.find_request_by_call("elsewhere", "x") is None


async def test_racing_deciders_in_two_stores_have_one_winner(
    pg_store: PostgresStore, second: PostgresStore
) -> None:
    request = await stored(pg_store)

    async def click(store: PostgresStore, who: str) -> str:
        try:
            await decide(store, request.id, decision(type="reject", approver=who))
        except Exception as exc:
            return type(exc).__name__
        return "won"

    outcomes = await asyncio.gather(*(click((pg_store, second)[i % 2], f"u{i}") for i in range(8)))
    assert sorted(outcomes).count("won") == 1
    assert set(outcomes) == {"won", "AlreadyDecided"}


# ---------------------------------------------------------------- the shared sweeper
async def test_two_replicas_claim_disjoint_due_requests(
    pg_store: PostgresStore, second: PostgresStore
) -> None:
    due = [await stored(pg_store, calls=((f"c{i}", "t", {}),), timeout_s=1) for i in range(10)]
    later = utcnow() + timedelta(seconds=5)
    mine = await pg_store.due_requests(later, limit=6)
    theirs = await second.due_requests(later, limit=100)
    assert len(mine) == 6 and len(theirs) == 4
    assert set(mine) | set(theirs) == {r.id for r in due}
    assert await pg_store.due_requests(later, limit=100) == mine  # its own again, not theirs
    assert await second.due_requests(later, limit=100) == theirs


async def test_a_claim_ends_on_its_lease_or_with_the_change_it_was_for(
    pg_store: PostgresStore, pg_url: str
) -> None:
    quick = PostgresStore(pg_url, schema=pg_store.schema, claim_s=0.3)
    await quick.open()
    try:
        a = await stored(pg_store, calls=(("a", "t", {}),), timeout_s=1)
        b = await stored(pg_store, calls=(("b", "t", {}),), timeout_s=2)
        later = utcnow() + timedelta(seconds=5)
        assert await quick.due_requests(later) == [a.id, b.id]
        assert await pg_store.due_requests(later) == []
        assert await pg_store.next_due_at() is None  # nothing this replica may take now
        await quick.update_request(a.id, expire(later))
        await asyncio.sleep(0.4)  # quick's lease on b ends (it "crashed" before expiring b)
        assert await pg_store.next_due_at() == b.expires_at
        assert await pg_store.due_requests(later) == [b.id]
    finally:
        await quick.close()


# ---------------------------------------------------------------- the database clock
async def test_the_database_clock_is_read_and_estimated(pg_store: PostgresStore) -> None:
    db_now = await pg_store.clock()
    assert abs((pg_store.now() - db_now).total_seconds()) < 1.0
    assert abs(pg_store.stats()["clock_offset_s"]) < 1.0
    assert db_now.tzinfo is not None


async def test_stats_name_the_backend_without_the_password(pg_store: PostgresStore) -> None:
    stats = pg_store.stats()
    assert (stats["backend"], stats["schema"]) == ("postgresql", pg_store.schema)
    assert stats["pool"]["idle"] >= 1 and stats["pool"]["max"] == 4
