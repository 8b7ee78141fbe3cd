"""What only the PostgreSQL outbox promises: replicas (separate stores, separate pools) share
the rows without ever claiming one twice, a dead worker's lease is taken over, and a version
1 schema gains the outbox — with its grants — on upgrade."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import psycopg
import pytest
from psycopg import sql

from signoff.model import utcnow
from signoff.store._pg_schema import _V1, APP_GRANTS, SCHEMA_VERSION
from signoff.store.base import OutboxItem
from signoff.store.postgres import PostgresStore
from tests.store import pg_cluster
from tests.store.factories import created_events, make_request

pytestmark = pytest.mark.asyncio


def item(request_id: str, n: int) -> OutboxItem:
    return OutboxItem(
        id=f"ob_{request_id}_{n}",
        request_id=request_id,
        channel="webhooks",
        kind="prompt",
        recipient=f"R{n}",
        next_at=utcnow() - timedelta(seconds=n % 7),
        data={"n": n},
    )


@pytest.fixture
async def replicas(pg_store: PostgresStore) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    """Two stores on one schema, each with its own pool and loop thread: two replicas."""
    other = PostgresStore(pg_store.dsn, schema=pg_store.schema, pool_max=4)
    await other.open()
    yield pg_store, other
    await other.close()


async def test_two_replicas_claiming_together_split_every_row_between_them(
    replicas: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = replicas
    request = make_request()
    rows = [item(request.id, n) for n in range(200)]
    _, created = await a.create_request(request, created_events(request), outbox=rows[:20])
    assert created
    assert await b.enqueue_outbox(rows) == 180

    async def worker(store: PostgresStore) -> list[str]:
        mine: list[str] = []
        while batch := await store.claim_outbox(utcnow(), limit=7, lease_s=300):
            mine += [c.id for c in batch]
            await asyncio.gather(*(store.complete_outbox(c.id) for c in batch[::2]))
        return mine

    got = await asyncio.gather(*(worker(s) for s in (a, b, a, b)))
    first, second = set(got[0] + got[2]), set(got[1] + got[3])
    everything = [i for ids in got for i in ids]
    assert len(everything) == len(set(everything)) == 200
    assert first | second == {r.id for r in rows}
    assert not first & second
    assert first and second  # both replicas took part
    assert {r.attempts for r in await a.outbox_for(request.id)} == {1}


async def test_a_dead_replicas_lease_is_taken_over_by_another(
    replicas: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = replicas
    request = make_request()
    await a.create_request(request, created_events(request), outbox=[item(request.id, 1)])
    now = utcnow()
    [held] = await a.claim_outbox(now, lease_s=30)
    assert await b.claim_outbox(now + timedelta(seconds=29)) == []
    [taken] = await b.claim_outbox(now + timedelta(seconds=31))
    assert (taken.id, taken.attempts) == (held.id, 2)
    await b.complete_outbox(taken.id, ref={"message": "m-1"})
    [row] = await a.outbox_for(request.id)
    assert (row.status, row.ref, row.lease_until) == ("sent", {"message": "m-1"}, None)


async def test_a_failed_create_writes_no_outbox_rows(pg_store: PostgresStore) -> None:
    request = make_request()
    await pg_store.create_request(request, created_events(request))
    clash = request.model_copy(update={"id": "req_clash"})  # same calls, other request id
    outcome, created = await pg_store.create_request(
        clash, created_events(clash), outbox=[item(request.id, 1)]
    )
    assert (outcome.id, created) == (request.id, False)
    assert await pg_store.outbox_for(request.id) == []
    assert await pg_store.next_outbox_at() is None


@pytest.fixture
def role_and_schema(pg_url: str) -> Iterator[tuple[str, str]]:
    role, schema = f"app_{secrets.token_hex(4)}", f"t_{secrets.token_hex(6)}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    yield role, schema
    pg_cluster.drop_schema(pg_url, schema)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


async def test_a_version_1_schema_gains_the_outbox_and_its_grants_on_upgrade(
    pg_url: str, role_and_schema: tuple[str, str]
) -> None:
    role, schema = role_and_schema
    async with PostgresStore(pg_url, schema=schema) as store:
        await store.grant(role, server=False)
    s = sql.Identifier(schema)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # back to version 1
        conn.execute(sql.SQL("DROP TABLE {}.outbox").format(s))
        conn.execute(  # version 3's quarantine columns (dropping them drops their indexes)
            sql.SQL(
                "ALTER TABLE {}.requests DROP COLUMN quarantined_at, DROP COLUMN quarantine_reason"
            ).format(s)
        )
        conn.execute(
            sql.SQL(
                "CREATE INDEX requests_due ON {}.requests (due_at) WHERE status = 'pending'"
            ).format(s)
        )
        conn.execute(sql.SQL("DROP TABLE {0}.grants, {0}.grants_version").format(s))  # version 4's
        conn.execute(sql.SQL("DROP TABLE {}.store_secrets").format(s))  # version 5's
        (thread_grants,) = [x for x in _V1 if "TABLE {s}.thread_grants" in x]
        conn.execute(sql.SQL(thread_grants).format(s=s))
        conn.execute(sql.SQL("DELETE FROM {}.schema_migrations WHERE version > 1").format(s))
        for statement in APP_GRANTS:  # as granted by a version 1 signoff (no outbox, grants)
            if "store_secrets" in statement:
                continue
            text = statement.replace(", {s}.outbox", "").replace(
                "{s}.grants, {s}.grants_version", "{s}.thread_grants"
            )
            conn.execute(sql.SQL(text).format(s=s, role=sql.Identifier(role)))

    async with PostgresStore(pg_url, schema=schema) as owner:
        assert owner.migrations_applied == list(range(2, SCHEMA_VERSION + 1))

    as_app = pg_url.replace("postgres@", f"{role}@", 1)
    async with PostgresStore(as_app, schema=schema) as replica:
        request = make_request()
        await replica.create_request(request, created_events(request), outbox=[item(request.id, 1)])
        [claimed] = await replica.claim_outbox(utcnow())
        await replica.complete_outbox(claimed.id)
        assert [r.status for r in await replica.outbox_for(request.id)] == ["sent"]
