"""The Store contract (signoff/store/base.py), run against every backend in conftest.BACKENDS."""

from __future__ import annotations

import asyncio
import itertools
import threading
from datetime import timedelta

import pytest

from signoff.model import (
    AlreadyDecided,
    AlreadyExecuted,
    ApprovalRequest,
    AuditEvent,
    DecisionError,
    IdempotencyConflict,
    NotFound,
    Transition,
    utcnow,
)
from signoff.model.resolution import cancel, due_transition, mark_execution
from signoff.store import AuditQuery, Store
from signoff.store.audit import iso_utc
from tests.store.factories import created_events, decide, decision, make_request

pytestmark = pytest.mark.asyncio

TWO_CALLS = (
    ("call-1", "send_email", {"to": "bob@example.com"}),
    ("call-2", "delete_file", {"path": "/tmp/x"}),
)


async def stored(store: Store, **kw: object) -> ApprovalRequest:
    request = make_request(**kw)  # type: ignore[arg-type]
    await store.create_request(request, created_events(request))
    return request


async def events_of(store: Store, request_id: str) -> list[str]:
    return [r.event for r in await store.read_audit(AuditQuery(request_id=request_id))]


def sweep(now: object) -> object:
    def mutate(req: ApprovalRequest) -> Transition:
        return due_transition(req, now) or Transition(req, changed=False)  # type: ignore[arg-type]

    return mutate


# ---------------------------------------------------------------- create / read
async def test_created_request_reads_back_equal(store: Store) -> None:
    request = make_request(calls=TWO_CALLS)
    returned, created = await store.create_request(request, created_events(request))
    assert created is True
    assert returned == request
    assert await store.get_request(request.id) == request


async def test_get_unknown_request_returns_none(store: Store) -> None:
    assert await store.get_request("req_nope") is None


async def test_find_request_by_call_uses_thread_and_call_id(store: Store) -> None:
    request = await stored(store, thread="t-a")
    found = await store.find_request_by_call("t-a", "call-1")
    assert found is not None and found.id == request.id
    assert await store.find_request_by_call("t-b", "call-1") is None


async def test_list_requests_is_newest_first(store: Store) -> None:
    base = utcnow()
    ids = []
    for i in range(3):
        r = await stored(store, calls=((f"c{i}", "t", {}),), created_at=base + timedelta(seconds=i))
        ids.append(r.id)
    assert [r.id for r in await store.list_requests()] == ids[::-1]
    assert [r.id for r in await store.list_requests(limit=1, offset=1)] == [ids[1]]


async def test_list_requests_filters_by_status_thread_and_kind(store: Store) -> None:
    a = await stored(store, thread="t-a", calls=(("a", "t", {}),))
    b = await stored(store, thread="t-b", calls=(("b", "t", {}),), kind="inquiry")
    await decide(store, a.id, decision("a", approver="alice"))
    assert [r.id for r in await store.list_requests(status="resolved")] == [a.id]
    assert [r.id for r in await store.list_requests(status="pending")] == [b.id]
    assert [r.id for r in await store.list_requests(thread="t-b")] == [b.id]
    assert [r.id for r in await store.list_requests(kind="inquiry")] == [b.id]


# ---------------------------------------------------------------- idempotent create
async def test_resubmitting_the_same_calls_returns_existing_and_writes_nothing(
    store: Store,
) -> None:
    first = await stored(store, calls=TWO_CALLS)
    before = await store.read_audit()
    retry = make_request(calls=TWO_CALLS)  # a new request id, the same step
    existing, created = await store.create_request(retry, created_events(retry))
    assert created is False
    assert existing.id == first.id
    assert await store.read_audit() == before
    assert len(await store.list_requests()) == 1


async def test_same_call_id_with_different_args_is_an_idempotency_conflict(store: Store) -> None:
    await stored(store, thread="t-1")
    other = make_request(thread="t-1", calls=(("call-1", "send_email", {"to": "eve@evil"}),))
    with pytest.raises(IdempotencyConflict, match="call-1 on thread t-1"):
        await store.create_request(other, created_events(other))


async def test_same_call_id_on_another_thread_is_a_new_request(store: Store) -> None:
    await stored(store, thread="t-1")
    again = make_request(thread="t-2")
    _, created = await store.create_request(again, created_events(again))
    assert created is True


async def test_step_mixing_stored_and_new_calls_is_an_idempotency_conflict(store: Store) -> None:
    await stored(store, calls=TWO_CALLS[:1])
    mixed = make_request(calls=TWO_CALLS)
    with pytest.raises(IdempotencyConflict, match="call-2"):
        await store.create_request(mixed, created_events(mixed))
    assert len(await store.list_requests()) == 1


async def test_reusing_a_request_id_for_other_calls_is_an_idempotency_conflict(
    store: Store,
) -> None:
    first = await stored(store)
    other = make_request(request_id=first.id, calls=(("call-9", "t", {}),))
    with pytest.raises(IdempotencyConflict, match=first.id):
        await store.create_request(other, created_events(other))


# ---------------------------------------------------------------- decisions
async def test_first_valid_decision_wins(store: Store) -> None:
    request = await stored(store)
    await decide(store, request.id, decision(type="approve", approver="alice"))
    with pytest.raises(AlreadyDecided, match="alice") as caught:
        await decide(store, request.id, decision(type="reject", approver="bob"))
    assert caught.value.by == "alice" and caught.value.at is not None
    final = await store.get_request(request.id)
    assert final is not None
    assert final.status == "resolved"
    assert final.calls[0].resolution == "approved"
    assert [d.approver for d in final.decisions] == ["alice"]


async def test_exact_duplicate_decision_is_an_idempotent_no_op(store: Store) -> None:
    request = await stored(store)
    await decide(store, request.id, decision(approver="alice"))
    before = await store.read_audit()
    repeat = await decide(store, request.id, decision(approver="alice"))
    assert repeat.changed is False
    assert await store.read_audit() == before


async def test_quorum_of_two_needs_two_distinct_approvers(store: Store) -> None:
    request = await stored(store, quorum=2)
    one = await decide(store, request.id, decision(approver="alice"))
    assert one.request.status == "pending"
    assert one.request.calls[0].approvals == ["alice"]
    again = await decide(store, request.id, decision(approver="alice"))
    assert again.changed is False
    two = await decide(store, request.id, decision(approver="bob"))
    assert two.request.status == "resolved"
    assert two.request.calls[0].resolution == "approved"
    assert await events_of(store, request.id) == ["created", "decided", "decided", "resolved"]


async def test_one_reject_vetoes_a_quorum_in_progress(store: Store) -> None:
    request = await stored(store, quorum=2)
    await decide(store, request.id, decision(approver="alice"))
    vetoed = await decide(store, request.id, decision(type="reject", approver="bob"))
    assert vetoed.request.status == "resolved"
    assert vetoed.request.calls[0].resolution == "rejected"


async def test_mutation_that_raises_writes_nothing(store: Store) -> None:
    request = await stored(store)
    before_audit = await store.read_audit()

    def broken(req: ApprovalRequest) -> Transition:
        req.status = "resolved"  # changes the copy it was given, then fails
        raise DecisionError("no", field="decisions")

    with pytest.raises(DecisionError):
        await store.update_request(request.id, broken)
    assert await store.get_request(request.id) == request
    assert await store.read_audit() == before_audit


async def test_invalid_decision_leaves_request_pending(store: Store) -> None:
    request = await stored(store)
    with pytest.raises(DecisionError, match="decisions"):
        await decide(store, request.id, decision(call_id="no-such-call"))
    current = await store.get_request(request.id)
    assert current is not None and current.status == "pending"


async def test_update_of_unknown_request_raises_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        await decide(store, "req_missing", decision())


async def test_each_change_increments_the_version(store: Store) -> None:
    request = await stored(store, quorum=2)
    one = await decide(store, request.id, decision(approver="alice"))
    two = await decide(store, request.id, decision(approver="bob"))
    assert (request.version, one.request.version, two.request.version) == (0, 1, 2)
    current = await store.get_request(request.id)
    assert current is not None and current.version == 2


# ---------------------------------------------------------------- deadlines
async def test_request_is_due_at_its_deadline_and_expires(store: Store) -> None:
    request = await stored(store, timeout_s=60)
    deadline = request.expires_at
    assert await store.due_requests(deadline - timedelta(seconds=1)) == []
    assert await store.next_due_at() == deadline
    assert await store.due_requests(deadline) == [request.id]
    transition = await store.update_request(request.id, sweep(deadline))  # type: ignore[arg-type]
    assert transition.request.status == "expired"
    assert transition.request.calls[0].resolution == "expired"
    assert await store.due_requests(deadline + timedelta(hours=1)) == []
    assert await store.next_due_at() is None
    assert (await events_of(store, request.id))[-1] == "expired"


async def test_due_requests_come_earliest_first_and_respect_limit(store: Store) -> None:
    late = await stored(store, calls=(("a", "t", {}),), timeout_s=120)
    early = await stored(store, calls=(("b", "t", {}),), timeout_s=60)
    later = utcnow() + timedelta(hours=1)
    assert await store.due_requests(later) == [early.id, late.id]
    assert await store.due_requests(later, limit=1) == [early.id]


async def test_escalation_extends_the_deadline_and_keeps_the_request_pending(
    store: Store,
) -> None:
    request = await stored(
        store, timeout_s=60, on_timeout="escalate", escalate_after_s=30, escalate_to=["cfo"]
    )
    assert request.escalate_at is not None
    assert await store.next_due_at() == request.escalate_at
    assert await store.due_requests(request.escalate_at) == [request.id]
    escalated = await store.update_request(request.id, sweep(request.escalate_at))  # type: ignore[arg-type]
    assert escalated.request.status == "pending"
    assert escalated.request.escalated is True
    assert escalated.request.expires_at > request.expires_at
    assert await store.next_due_at() == escalated.request.expires_at
    assert (await events_of(store, request.id))[-1] == "escalated"


async def test_cancel_resolves_every_pending_call_cancelled(store: Store) -> None:
    request = await stored(store, calls=TWO_CALLS)
    await decide(store, request.id, decision("call-1", approver="alice"))
    done = await store.update_request(
        request.id, lambda r: cancel(r, actor="owner", reason="user gave up", now=utcnow())
    )
    assert done.request.status == "cancelled"
    assert [c.resolution for c in done.request.calls] == ["approved", "cancelled"]
    assert (await events_of(store, request.id))[-1] == "cancelled"


# ---------------------------------------------------------------- execution ledger
async def test_execution_is_claimed_exactly_once(store: Store) -> None:
    request = await stored(store)
    await decide(store, request.id, decision(approver="alice"))
    await store.update_request(
        request.id, lambda r: mark_execution(r, "call-1", "executing", now=utcnow())
    )
    with pytest.raises(AlreadyExecuted, match="already executing"):
        await store.update_request(
            request.id, lambda r: mark_execution(r, "call-1", "executing", now=utcnow())
        )
    done = await store.update_request(
        request.id, lambda r: mark_execution(r, "call-1", "executed", now=utcnow())
    )
    assert done.request.calls[0].execution == "executed"
    assert (await events_of(store, request.id))[-2:] == ["executing", "executed"]


async def test_rejected_call_may_not_be_executed(store: Store) -> None:
    request = await stored(store)
    await decide(store, request.id, decision(type="reject", approver="alice"))
    with pytest.raises(AlreadyExecuted, match="rejected"):
        await store.update_request(
            request.id, lambda r: mark_execution(r, "call-1", "executing", now=utcnow())
        )


# ---------------------------------------------------------------- waiting
async def test_wait_returns_at_once_when_already_terminal(store: Store) -> None:
    request = await stored(store)
    await decide(store, request.id, decision(approver="alice"))
    done = await store.wait(request.id, timeout=0)
    assert done.status == "resolved"


async def test_wait_wakes_when_another_task_decides(store: Store) -> None:
    request = await stored(store)
    waiter = asyncio.create_task(store.wait(request.id, timeout=30))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    await decide(store, request.id, decision(approver="alice"))
    done = await asyncio.wait_for(waiter, 30)
    assert done.status == "resolved" and done.decisions[0].approver == "alice"


async def test_wait_wakes_when_another_thread_with_its_own_loop_decides(store: Store) -> None:
    request = await stored(store)
    waiter = asyncio.create_task(store.wait(request.id, timeout=30))
    await asyncio.sleep(0.01)
    thread = threading.Thread(
        target=lambda: asyncio.run(decide(store, request.id, decision(approver="bob")))
    )
    thread.start()
    done = await asyncio.wait_for(waiter, 30)
    thread.join()
    assert done.status == "resolved" and done.decisions[0].approver == "bob"


async def test_wait_times_out_with_the_current_state(store: Store) -> None:
    request = await stored(store, quorum=2)
    await decide(store, request.id, decision(approver="alice"))
    current = await store.wait(request.id, timeout=0.05)
    assert current.status == "pending"
    assert current.calls[0].approvals == ["alice"]


async def test_wait_for_unknown_request_raises_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.wait("req_missing", timeout=1)


async def test_non_terminal_change_does_not_wake_a_waiter(store: Store) -> None:
    request = await stored(store, quorum=2)
    waiter = asyncio.create_task(store.wait(request.id, timeout=30))
    await asyncio.sleep(0.01)
    await decide(store, request.id, decision(approver="alice"))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    await decide(store, request.id, decision(approver="bob"))
    assert (await asyncio.wait_for(waiter, 30)).status == "resolved"


# ---------------------------------------------------------------- listeners
async def test_listeners_hear_each_committed_change_with_its_last_event(store: Store) -> None:
    heard: list[tuple[str, str]] = []
    remove = store.add_listener(lambda req, event: heard.append((req.status, event)))
    request = await stored(store)
    await decide(store, request.id, decision(approver="alice"))
    await decide(store, request.id, decision(approver="alice"))  # no-op: not heard
    remove()
    await stored(store, calls=(("other", "t", {}),))  # after removal: not heard
    assert heard == [("pending", "created"), ("resolved", "resolved")]


async def test_failing_listener_does_not_undo_the_change(store: Store) -> None:
    def broken(req: ApprovalRequest, event: str) -> None:
        raise RuntimeError("listener bug")

    store.add_listener(broken)
    request = await stored(store)
    done = await decide(store, request.id, decision(approver="alice"))
    assert done.request.status == "resolved"
    current = await store.get_request(request.id)
    assert current is not None and current.status == "resolved"


# ---------------------------------------------------------------- audit
async def test_audit_chain_of_a_full_lifecycle_verifies(store: Store) -> None:
    request = await stored(store, calls=TWO_CALLS)
    await decide(store, request.id, decision("call-1", approver="alice"))
    await decide(store, request.id, decision("call-2", type="reject", approver="bob"))
    await store.update_request(
        request.id, lambda r: mark_execution(r, "call-1", "executing", now=utcnow())
    )
    records = await store.read_audit()
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    assert records[0].prev_hash == "0" * 64
    assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(records))
    verification = await store.verify_audit()
    assert verification.ok and verification.checked == len(records)


async def test_audit_records_keep_the_event_fields(store: Store) -> None:
    request = await stored(store)
    await decide(store, request.id, decision(approver="alice", message="fine"))
    decided = (await store.read_audit(AuditQuery(event="decided")))[0]
    assert decided.request_id == request.id
    assert (decided.tool, decided.tool_call_id, decided.actor) == ("send_email", "call-1", "alice")
    assert (decided.principal, decided.thread, decided.rule) == (
        "owner",
        "thread-1",
        "needs-review",
    )
    assert decided.data["message"] == "fine"
    assert decided.at.tzinfo is not None


async def test_read_audit_pages_by_seq_and_filters(store: Store) -> None:
    a = await stored(store, calls=(("a", "t", {}),))
    await stored(store, calls=(("b", "t", {}),))
    await decide(store, a.id, decision("a", approver="alice"))
    page1 = await store.read_audit(AuditQuery(limit=2))
    page2 = await store.read_audit(AuditQuery(after_seq=page1[-1].seq))
    assert [r.seq for r in page1 + page2] == [1, 2, 3, 4]
    assert [r.event for r in await store.read_audit(AuditQuery(request_id=a.id))] == [
        "created",
        "decided",
        "resolved",
    ]
    assert [r.actor for r in await store.read_audit(AuditQuery(actor="alice"))] == ["alice"]
    future = utcnow() + timedelta(hours=1)
    assert await store.read_audit(AuditQuery(since=future)) == []
    assert len(await store.read_audit(AuditQuery(until=future))) == 4


async def test_audit_nowait_events_appear_after_flush(store: Store) -> None:
    for i in range(5):
        store.audit_nowait(AuditEvent(event="allowed", tool="read_file", data={"i": i}))
    await store.flush_audit()
    allowed = await store.read_audit(AuditQuery(event="allowed"))
    assert [r.data["i"] for r in allowed] == [0, 1, 2, 3, 4]
    assert (await store.verify_audit()).ok


async def test_audit_nowait_events_are_written_at_close(store: Store, backend: object) -> None:
    for i in range(3):
        store.audit_nowait(AuditEvent(event="denied", tool="rm", data={"i": i}))
    await store.close()
    reopened = await backend.reopen(store)  # type: ignore[attr-defined]
    try:
        denied = await reopened.read_audit(AuditQuery(event="denied"))
        assert [r.data["i"] for r in denied] == [0, 1, 2]
    finally:
        await reopened.close()


async def test_append_audit_writes_events_now_in_order(store: Store) -> None:
    await store.append_audit(
        [AuditEvent(event="notified", request_id="r1", data={"channel": c}) for c in "ab"]
    )
    rows = await store.read_audit(AuditQuery(event="notified"))
    assert [r.data["channel"] for r in rows] == ["a", "b"]


async def test_count_events_by_tool_since_and_actor_field(store: Store) -> None:
    now = utcnow()
    old = now - timedelta(hours=2)
    for principal, at in (("p1", now), ("p1", now), ("p2", now), ("p1", old)):
        store.audit_nowait(AuditEvent(event="allowed", at=at, tool="pay", principal=principal))
    store.audit_nowait(AuditEvent(event="allowed", at=now, tool="other", principal="p1"))
    since = now - timedelta(hours=1)
    await store.flush_audit()
    assert await store.count_events("allowed", tool="pay", since=since) == 3
    assert await store.count_events("allowed", tool="pay", since=old) == 4
    assert (
        await store.count_events("allowed", tool="pay", since=since, by="principal", value="p1")
        == 2
    )
    assert await store.count_events("denied", tool="pay", since=old) == 0


async def test_count_events_rejects_an_unknown_by_field(store: Store) -> None:
    with pytest.raises(ValueError, match="principal"):
        await store.count_events("allowed", tool="x", since=utcnow(), by="tool", value="x")


async def test_audit_data_with_python_values_round_trips_and_verifies(store: Store) -> None:
    at = utcnow()
    store.audit_nowait(
        AuditEvent(event="allowed", tool="t", data={"when": at, "tags": ("a", "b"), "n": 1.5})
    )
    await store.flush_audit()
    (row,) = await store.read_audit(AuditQuery(event="allowed"))
    assert row.data == {"when": iso_utc(at), "tags": ["a", "b"], "n": 1.5}
    assert (await store.verify_audit()).ok


async def test_stats_name_the_backend(store: Store) -> None:
    assert store.stats()["backend"] in ("memory", "sqlite", "postgresql")


async def test_sweep_after_a_missed_escalation_without_extension_expires(store: Store) -> None:
    request = await stored(store, timeout_s=60, escalate_after_s=30, escalate_to=["cfo"])
    late = request.expires_at + timedelta(minutes=5)  # the process was down at both times
    assert await store.due_requests(late) == [request.id]
    done = await store.update_request(request.id, sweep(late))  # type: ignore[arg-type]
    assert done.request.status == "expired"


async def test_sweep_after_a_missed_escalation_escalates_with_the_full_extension(
    store: Store,
) -> None:
    request = await stored(
        store, timeout_s=60, on_timeout="escalate", escalate_after_s=30, escalate_to=["cfo"]
    )
    late = request.expires_at + timedelta(minutes=5)
    done = await store.update_request(request.id, sweep(late))  # type: ignore[arg-type]
    assert done.request.status == "pending" and done.request.escalated
    assert done.request.expires_at == late + timedelta(seconds=60)
    assert await store.next_due_at() == late + timedelta(seconds=60)


async def test_audit_nowait_from_many_threads_loses_nothing(store: Store, backend: object) -> None:
    threads, per_thread = 8, 1500

    def produce(k: int) -> None:
        for i in range(per_thread):
            store.audit_nowait(AuditEvent(event="allowed", tool=f"t{k}", data={"i": i}))

    workers = [threading.Thread(target=produce, args=(k,)) for k in range(threads)]
    for worker in workers:
        worker.start()
    while any(w.is_alive() for w in workers):
        await store.flush_audit()  # flushes racing with producers
        await asyncio.sleep(0.001)
    for worker in workers:
        worker.join()
    await store.close()
    reopened = await backend.reopen(store)  # type: ignore[attr-defined]
    try:
        rows = await reopened.read_audit(AuditQuery(limit=threads * per_thread + 1))
        assert len(rows) == threads * per_thread
        for k in range(threads):  # each producer's events keep their order
            assert [r.data["i"] for r in rows if r.tool == f"t{k}"] == list(range(per_thread))
        assert (await reopened.verify_audit()).ok
    finally:
        await reopened.close()
