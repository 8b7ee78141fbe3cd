"""A notification makes a replica read the row only when the change can wake a waiter: the
payload says whether the request is now terminal (``store/_pg_wake.py``)."""

from __future__ import annotations

import asyncio

import pytest

from signoff.model import ApprovalRequest
from signoff.store._pg_listen import decode
from signoff.store.postgres import PostgresStore
from tests.store.factories import created_events, decide, decision, make_request
from tests.store.test_pg_wake import parked

pytestmark = pytest.mark.asyncio


async def quorum_of_two(store: PostgresStore) -> ApprovalRequest:
    request = make_request(quorum=2)
    await store.create_request(request, created_events(request))
    return request


async def test_a_change_that_leaves_the_request_pending_is_not_read_for(
    pg_store: PostgresStore, second: PostgresStore
) -> None:
    request = await quorum_of_two(pg_store)
    waiter = await parked(pg_store, request.id)
    before = pg_store.stats()
    await decide(pg_store, request.id, decision(approver="alice"))  # ours: 1 of 2
    await decide(second, request.id, decision(approver="bob", type="approve"))  # theirs: ends it
    # Only the second note can wake the waiter, and notes are handled one after the other:
    # once it is awake, both were handled.
    assert (await asyncio.wait_for(waiter, 10)).status == "resolved"
    assert pg_store.stats()["note_reads"] == before["note_reads"] + 1  # the terminal one


async def test_a_note_without_the_terminal_field_is_read_for_a_waiter(
    pg_store: PostgresStore,
) -> None:
    """A replica of an older version sends no ``terminal``: its notes are read as before."""
    old = decode('{"id": "r1", "event": "decided", "origin": "x", "seq": 7}')
    assert old is not None and old.terminal is None
    new = decode('{"id": "r1", "event": "decided", "origin": "x", "terminal": false, "seq": 7}')
    assert new is not None and new.terminal is False
    odd = decode('{"id": "r1", "event": "decided", "origin": "x", "terminal": "no", "seq": 7}')
    assert odd is not None and odd.terminal is None


async def test_this_stores_own_notes_are_not_read_and_an_unsure_write_re_reads(
    pg_store: PostgresStore,
) -> None:
    """A store wakes its waiters after its own statement; if that statement raised once sent
    (its outcome unknown), it re-reads the row for them (``_unsure``) — its own notes are
    not read for. A store with the same origin stands in for a write of this one whose wake
    never ran."""
    twin = PostgresStore(pg_store.dsn, schema=pg_store.schema, pool_max=2)
    twin.origin = pg_store.origin
    await twin.open()
    try:
        request = make_request()
        await pg_store.create_request(request, created_events(request))
        waiter = await parked(pg_store, request.id)
        reads = pg_store.stats()["note_reads"]
        await decide(twin, request.id, decision(approver="alice"))
        pg_store._unsure(request.id)
        assert (await asyncio.wait_for(waiter, 10)).status == "resolved"
        assert pg_store.stats()["note_reads"] == reads
    finally:
        await twin.close()
