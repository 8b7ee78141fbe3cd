"""The grants part of the Store contract (signoff/store/base.py), run against every backend in
conftest.BACKENDS: create, read, list, revoke, the grants version, expiry noting, and grants
written by a decision in the same transaction as the decision."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest

from signoff.model import (
    ApprovalRequest,
    IdempotencyConflict,
    NotFound,
    StoreError,
    Transition,
    utcnow,
)
from signoff.model.grants import Grant
from signoff.model.resolution import apply_decisions, grant_created_event
from signoff.store import AuditQuery, Store
from tests.store.conftest import Backend
from tests.store.factories import (
    created_events,
    decision,
    grant_created,
    make_grant,
    make_request,
    revoke_event,
    revoke_grant,
)

pytestmark = pytest.mark.asyncio

HOUR = timedelta(hours=1)


async def grant_events(store: Store) -> list[tuple[str, str | None]]:
    return [
        (r.event, r.data.get("grant_id") or r.data.get("grant", {}).get("id"))
        for r in await store.read_audit()
        if r.event.startswith("grant_")
    ]


# ---------------------------------------------------------------- create / read
async def test_a_created_grant_reads_back_equal(store: Store) -> None:
    grant = make_grant()
    returned = await store.create_grant(grant, [grant_created_event(grant, grant.created_at)])
    assert returned == grant
    assert await store.get_grant(grant.id) == grant
    assert await store.list_grants() == [grant]


async def test_creating_writes_its_audit_events_and_bumps_the_version(store: Store) -> None:
    before = await store.grants_version()
    grant = await grant_created(store)
    assert await store.grants_version() != before
    [record] = await store.read_audit(AuditQuery(event="grant_created"))
    assert record.actor == "bob" and record.tool == "deploy" and record.rule == "prod-deploy"
    assert record.data["grant"]["id"] == grant.id
    assert (await store.verify_audit()).ok


async def test_creating_the_same_grant_again_writes_nothing(store: Store) -> None:
    grant = await grant_created(store)
    version = await store.grants_version()
    again = await store.create_grant(grant, [grant_created_event(grant, utcnow())])
    assert again == grant
    assert await store.grants_version() == version
    assert await grant_events(store) == [("grant_created", grant.id)]


async def test_another_grant_under_a_stored_id_is_a_conflict(store: Store) -> None:
    grant = await grant_created(store)
    other = make_grant(grant_id=grant.id, tool="rm")
    with pytest.raises(IdempotencyConflict):
        await store.create_grant(other, [grant_created_event(other, utcnow())])
    assert await store.get_grant(grant.id) == grant
    assert await grant_events(store) == [("grant_created", grant.id)]


async def test_an_unknown_grant_reads_as_none(store: Store) -> None:
    assert await store.get_grant("grant_nope") is None


async def test_every_scope_and_effect_round_trips(store: Store) -> None:
    grants = [
        make_grant(scope="agent", thread=None, principal=None, when=None),
        make_grant(scope="principal", thread=None, agent=None, effect="deny"),
        make_grant(scope="global", thread=None, agent=None, principal=None, reason=None),
    ]
    for grant in grants:
        await store.create_grant(grant, [])
    for grant in grants:
        assert await store.get_grant(grant.id) == grant


# ---------------------------------------------------------------- listing
async def test_grants_are_listed_newest_first_up_to_the_limit(store: Store) -> None:
    base = utcnow()
    ids = []
    for i in range(3):
        ids.append((await grant_created(store, created_at=base + timedelta(seconds=i))).id)
    assert [g.id for g in await store.list_grants()] == ids[::-1]
    assert [g.id for g in await store.list_grants(limit=2)] == ids[:0:-1]


async def test_active_grants_leave_out_revoked_and_expired_ones(store: Store) -> None:
    now = utcnow()
    live = await grant_created(store, created_at=now - timedelta(hours=1))
    revoked = await grant_created(store, created_at=now - timedelta(minutes=50))
    await revoke_grant(store, revoked.id)
    expired = await grant_created(store, created_at=now - HOUR * 2, ttl=HOUR)
    at_the_edge = await grant_created(store, created_at=now - HOUR * 8)  # expires_at == now
    assert {g.id for g in await store.list_grants()} == {
        live.id,
        revoked.id,
        expired.id,
        at_the_edge.id,
    }
    assert [g.id for g in await store.list_grants(active_at=now)] == [live.id]
    assert [g.id for g in await store.list_grants(active_at=now - timedelta(hours=1.5))] == [
        live.id,
        expired.id,
        at_the_edge.id,
    ]


# ---------------------------------------------------------------- revoking
async def test_revoking_marks_the_grant_audits_and_bumps_the_version(store: Store) -> None:
    grant = await grant_created(store)
    version = await store.grants_version()
    now = utcnow()
    done = await store.revoke_grant(
        grant.id, by="carol", reason="incident", now=now, events=[revoke_event(grant.id)]
    )
    assert (done.revoked_at, done.revoked_by, done.revoke_reason) == (now, "carol", "incident")
    unrevoked = {"revoked_at": None, "revoked_by": None, "revoke_reason": None}
    assert done.model_copy(update=unrevoked) == grant
    assert await store.get_grant(grant.id) == done
    assert await store.grants_version() != version
    assert await grant_events(store) == [("grant_created", grant.id), ("grant_revoked", grant.id)]
    assert (await store.verify_audit()).ok


async def test_revoking_a_revoked_grant_returns_it_unchanged_and_writes_nothing(
    store: Store,
) -> None:
    grant = await grant_created(store)
    first = await revoke_grant(store, grant.id, by="carol")
    version = await store.grants_version()
    again = await revoke_grant(store, grant.id, by="dave")
    assert again == first and again.revoked_by == "carol"
    assert await store.grants_version() == version
    assert [e for e, _ in await grant_events(store)] == ["grant_created", "grant_revoked"]


async def test_revoking_an_unknown_grant_is_not_found(store: Store) -> None:
    version = await store.grants_version()
    with pytest.raises(NotFound):
        await revoke_grant(store, "grant_nope")
    assert await store.grants_version() == version
    assert await grant_events(store) == []


async def test_a_revocation_by_another_store_instance_changes_the_version_seen_here(
    store: Store, backend: Backend
) -> None:
    grant = await grant_created(store)
    seen = await store.grants_version()
    other = await backend.reopen(store)
    try:
        assert await other.grants_version() == seen
        await revoke_grant(other, grant.id)
    finally:
        if other is not store:
            await other.close()
    assert await store.grants_version() != seen
    [active] = [g for g in await store.list_grants() if g.id == grant.id]
    assert active.revoked_by == "carol"
    assert await store.list_grants(active_at=utcnow()) == []


# ---------------------------------------------------------------- expiry
async def test_expired_grants_are_noted_once_each_with_an_audit_event(store: Store) -> None:
    now = utcnow()
    due = await grant_created(store, created_at=now - HOUR * 2, ttl=HOUR)
    edge = await grant_created(store, created_at=now - HOUR * 8, thread="t-2")
    revoked = await grant_created(store, created_at=now - HOUR * 2, ttl=HOUR)
    await revoke_grant(store, revoked.id)
    await grant_created(store, created_at=now)  # still running
    version = await store.grants_version()

    noted = await store.note_expired_grants(now)
    assert sorted(g.id for g in noted) == sorted([due.id, edge.id])
    assert await store.note_expired_grants(now) == []
    assert await store.note_expired_grants(now + timedelta(minutes=1)) == []
    records = await store.read_audit(AuditQuery(event="grant_expired"))
    assert sorted((r.data["grant_id"], r.thread) for r in records) == sorted(
        [(due.id, "t-1"), (edge.id, "t-2")]
    )
    for r in records:
        assert (r.tool, r.rule, r.principal, r.agent, r.actor) == (
            "deploy",
            "prod-deploy",
            "erin",
            "billing-bot",
            None,
        )
    assert await store.grants_version() == version  # expiry is a matter of time, not a change
    assert (await store.verify_audit()).ok


async def test_noting_nothing_due_writes_nothing(store: Store) -> None:
    grant = await grant_created(store)
    assert await store.note_expired_grants(utcnow()) == []
    assert await grant_events(store) == [("grant_created", grant.id)]


async def test_a_noted_grant_stays_listed_for_the_record(store: Store) -> None:
    now = utcnow()
    grant = await grant_created(store, created_at=now - timedelta(hours=9))
    await store.note_expired_grants(now)
    assert await store.list_grants() == [grant]
    assert await store.get_grant(grant.id) == grant


# ---------------------------------------------------------------- grants of a decision
async def stored_request(store: Store) -> ApprovalRequest:
    request = make_request(thread="t-1", calls=(("call-1", "deploy", {"version": "v2"}),))
    await store.create_request(request, created_events(request))
    return request


def approve_with(grant: Grant) -> Any:
    def mutate(req: ApprovalRequest) -> Transition:
        return apply_decisions(
            req,
            [decision(approver="bob", name="deploy")],
            approver_roles=(),
            now=utcnow(),
            grants={"call-1": grant},
        )

    return mutate


async def test_a_decisions_grant_commits_with_it(store: Store) -> None:
    request = await stored_request(store)
    version = await store.grants_version()
    grant = make_grant(source_request=request.id, source_call="call-1")
    transition = await store.update_request(request.id, approve_with(grant))
    assert transition.grants == [grant]
    assert await store.get_grant(grant.id) == grant
    assert await store.grants_version() != version
    events = [r.event for r in await store.read_audit(AuditQuery(request_id=request.id))]
    assert "grant_created" in events and events[-1] == "resolved"
    assert (await store.verify_audit()).ok


async def test_a_decision_without_grants_leaves_the_version_alone(store: Store) -> None:
    request = await stored_request(store)
    version = await store.grants_version()
    await store.update_request(
        request.id,
        lambda req: apply_decisions(
            req, [decision(approver="bob", name="deploy")], approver_roles=(), now=utcnow()
        ),
    )
    assert await store.grants_version() == version
    assert await store.list_grants() == []


async def test_a_failing_mutation_writes_no_grant(store: Store) -> None:
    request = await stored_request(store)
    version = await store.grants_version()
    grant = make_grant()

    def mutate(req: ApprovalRequest) -> Transition:
        approve_with(grant)(req)
        raise RuntimeError("the gate changed its mind")

    with pytest.raises(RuntimeError):
        await store.update_request(request.id, mutate)
    assert await store.get_grant(grant.id) is None
    assert await store.grants_version() == version


async def test_a_decision_whose_grant_id_is_taken_writes_nothing_at_all(store: Store) -> None:
    request = await stored_request(store)
    taken = await grant_created(store)
    version = await store.grants_version()
    audit = await store.read_audit()
    with pytest.raises(StoreError):
        await store.update_request(request.id, approve_with(make_grant(grant_id=taken.id)))
    current = await store.get_request(request.id)
    assert current is not None and current.status == "pending" and current.decisions == []
    assert await store.get_grant(taken.id) == taken
    assert await store.grants_version() == version
    assert await store.read_audit() == audit


async def test_grants_survive_reopening(store: Store, backend: Backend) -> None:
    grant = await grant_created(store)
    revoked = await grant_created(store, created_at=utcnow() + timedelta(seconds=1))
    done = await revoke_grant(store, revoked.id)
    version = await store.grants_version()
    again = await backend.reopen(store)
    try:
        assert await again.list_grants() == [done, grant]
        assert await again.grants_version() == version
    finally:
        if again is not store:
            await again.close()


async def test_the_chain_links_grant_events_with_the_rest(store: Store) -> None:
    request = await stored_request(store)
    await store.update_request(request.id, approve_with(make_grant()))
    await revoke_grant(store, (await grant_created(store)).id)
    await store.note_expired_grants(utcnow() + timedelta(days=1))
    records = await store.read_audit()
    assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(records))
    assert (await store.verify_audit()).ok
