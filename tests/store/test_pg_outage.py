"""The database goes away: operations fail closed with a clear error, and everything recovers
when it returns — without restarting the store, and without losing a waiter or an event."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from signoff.model import AuditEvent, StoreError
from signoff.store import AuditQuery
from signoff.store.postgres import PostgresStore
from tests.store.factories import created_events, decide, decision, make_request
from tests.store.pg_cluster import Cluster
from tests.store.test_pg_wake import parked, until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    try:
        # Durable: with synchronous_commit=off an immediate stop loses the last commits.
        started = Cluster(fast=False).start()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    yield started
    started.stop()


async def test_an_outage_fails_closed_then_everything_recovers(cluster: Cluster) -> None:
    store = PostgresStore(cluster.url, schema="outage", timeout_s=1.0)
    other = PostgresStore(cluster.url, schema="outage", timeout_s=1.0)
    try:
        request = make_request()
        await store.create_request(request, created_events(request))
        await other.open()
        waiter = await parked(store, request.id)

        await asyncio.to_thread(cluster.stop_immediately)
        started = time.monotonic()
        with pytest.raises(
            StoreError, match=r"PostgreSQL store .*(cannot connect|lost the database)"
        ):
            await store.get_request(request.id)
        with pytest.raises(StoreError, match="PostgreSQL store"):
            await decide(other, request.id, decision(approver="alice"))
        assert time.monotonic() - started < 10, "failing closed took too long"
        store.audit_nowait(AuditEvent(event="denied", tool="rm"))  # kept until it can be written
        await until(lambda: not store.stats()["listening"])

        await asyncio.to_thread(cluster.start_again)
        current = await store.get_request(request.id)
        assert current is not None and current.status == "pending"
        await until(lambda: store.stats()["listening"])
        await decide(other, request.id, decision(approver="alice"))
        done = await asyncio.wait_for(waiter, 30)
        assert done.status == "resolved"
        await store.flush_audit()
        assert [r.event for r in await store.read_audit(AuditQuery(event="denied"))] == ["denied"]
        assert (await store.verify_audit()).ok
        assert store.stats()["listener_connects"] == 2
    finally:
        await other.close()
        await store.close()
