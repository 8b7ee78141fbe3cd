"""The PostgreSQL store skips the read of an update when this process wrote the row last
(``store/_written.py``): one round trip instead of two — and never a wrong write when
another replica (or anything else) changed the row since."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from signoff.model import AlreadyDecided, ApprovalRequest, RequestQuarantined, Transition, utcnow
from signoff.model.resolution import mark_execution
from signoff.store import AuditQuery
from signoff.store.base import Mutation
from signoff.store.postgres import PostgresStore
from tests.store.factories import created_events, decide, decision, make_request


async def stored(store: PostgresStore) -> ApprovalRequest:
    request = make_request()
    await store.create_request(request, created_events(request))
    return request


async def half_decided(store: PostgresStore) -> ApprovalRequest:
    """Two calls, the first approved here: still pending, and remembered by ``store``."""
    request = make_request(calls=(("call-1", "send_email", {}), ("call-2", "send_email", {})))
    await store.create_request(request, created_events(request))
    await decide(store, request.id, decision("call-1", approver="alice"))
    return request


def claim(call_id: str = "call-1") -> Mutation:
    def mutate(req: ApprovalRequest) -> Transition:
        return mark_execution(req, call_id, "executing", now=utcnow(), in_place=True)

    return mutate


async def test_a_cycle_of_this_process_updates_without_reading(pg_store: PostgresStore) -> None:
    request = await stored(pg_store)
    await decide(pg_store, request.id, decision(approver="alice"))
    await pg_store.update_request(request.id, claim())
    assert pg_store.stats()["updates_without_read"] == 2
    row = await pg_store.get_request(request.id)
    assert row is not None and row.calls[0].execution == "executing"
    assert [r.event for r in await pg_store.read_audit(AuditQuery(request_id=request.id))] == [
        "created",
        "decided",
        "resolved",
        "executing",
    ]
    assert (await pg_store.verify_audit()).ok


async def test_a_row_another_replica_changed_is_read_again(
    pg_store: PostgresStore, second: PostgresStore
) -> None:
    """Written here (call-2 pending), call-2 approved there: a claim of call-2 here is
    refused on the stale copy, so it is decided again on the row as stored — and succeeds."""
    request = await half_decided(pg_store)
    await decide(second, request.id, decision("call-2", approver="bob"))
    transition = await pg_store.update_request(request.id, claim("call-2"))
    assert transition.request.calls[1].execution == "executing"
    assert pg_store.stats()["updates_without_read"] == 1  # call-1's decision only


async def test_a_stale_copy_never_overwrites_a_newer_row(
    pg_store: PostgresStore, second: PostgresStore
) -> None:
    """Written here, call-2 rejected there; an approval of call-2 made here on the stale copy
    must not land: its conditional write misses, the row is read, and it is refused."""
    request = await half_decided(pg_store)
    await decide(second, request.id, decision("call-2", type="reject", approver="bob"))
    with pytest.raises(AlreadyDecided):
        await decide(pg_store, request.id, decision("call-2", approver="carol"))
    row = await pg_store.get_request(request.id)
    assert row is not None and row.calls[1].resolution == "rejected"
    decided = await pg_store.read_audit(AuditQuery(request_id=request.id, event="decided"))
    assert [e.actor for e in decided] == ["alice", "bob"]
    assert pg_store.stats()["updates_without_read"] == 1  # call-1's decision only


async def test_the_next_update_leaves_the_returned_snapshot_as_it_was(
    pg_store: PostgresStore,
) -> None:
    """What an update returns is the read-only snapshot this store keeps for its next update
    (as every store hands out its snapshots): that update changes a working copy of it,
    with its own calls, and the snapshot stays as it was returned."""
    request = await stored(pg_store)
    done = await decide(pg_store, request.id, decision(approver="alice"))
    before = done.request.model_dump()
    transition = await pg_store.update_request(request.id, claim())
    assert pg_store.stats()["updates_without_read"] == 2
    assert transition.request is not done.request
    assert transition.request.calls[0] is not done.request.calls[0]
    assert transition.request.calls[0].execution == "executing"
    assert done.request.model_dump() == before


async def test_a_write_without_a_read_clears_a_quarantine_mark(pg_store: PostgresStore) -> None:
    """A replica that could not parse the row (say, an older version) marked it; this
    process wrote that document and can: its next write clears the mark, as a read here
    that parses it does, so the sweeper sees the row again."""
    request = await half_decided(pg_store)
    with psycopg.connect(pg_store.dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "UPDATE {}.requests SET quarantined_at = now(), quarantine_reason = 'x' "
                "WHERE id = %s"
            ).format(sql.Identifier(pg_store.schema)),
            (request.id,),
        )
    await decide(pg_store, request.id, decision("call-2", approver="bob"))
    assert pg_store.stats()["updates_without_read"] == 2
    with psycopg.connect(pg_store.dsn, autocommit=True) as conn:
        row = conn.execute(
            sql.SQL("SELECT quarantined_at FROM {}.requests WHERE id = %s").format(
                sql.Identifier(pg_store.schema)
            ),
            (request.id,),
        ).fetchone()
    assert row == (None,)


async def test_a_submitted_document_that_does_not_read_back_is_not_remembered(
    pg_store: PostgresStore,
) -> None:
    """Stored as given, but nested too deep to parse: the decision reads the row, which
    quarantines it — the remembered copy never writes over it."""
    request = make_request(thread="t-deep")
    deep: dict[str, object] = {}
    for _ in range(250):
        deep = {"x": deep}
    request.attrs = deep
    await pg_store.create_request(request, created_events(request))
    with pytest.raises(RequestQuarantined):
        await decide(pg_store, request.id, decision(approver="alice"))
    assert pg_store.stats()["updates_without_read"] == 0
