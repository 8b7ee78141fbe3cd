"""The PostgreSQL store runs statements on its caller's event loop, from one pool that every
loop and thread borrows from (``store/_pg_slots.py``); callers on a ``LoopThread`` (the
gate's portal) still go through the store's own loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from signoff._loopthread import LoopThread, on_a_loop_thread
from signoff.model import ApprovalRequest, StoreError, Transition, utcnow
from signoff.model.resolution import apply_decisions
from signoff.store._pg_slots import Slots
from signoff.store.postgres import PostgresStore
from tests.store.factories import created_events, decide, decision, make_request

pytestmark = pytest.mark.asyncio


def approving(seen: list[str]) -> Callable[[ApprovalRequest], Transition]:
    """A decision that notes the thread it runs on."""

    def mutate(req: ApprovalRequest) -> Transition:
        seen.append(threading.current_thread().name)
        return apply_decisions(req, [decision(approver="alice")], approver_roles=(), now=utcnow())

    return mutate


async def test_a_change_runs_on_the_callers_loop(pg_store: PostgresStore) -> None:
    request = make_request()
    await pg_store.create_request(request, created_events(request))
    seen: list[str] = []
    await pg_store.update_request(request.id, approving(seen))
    assert seen == [threading.current_thread().name]
    assert pg_store.stats()["pool"]["in_use"] == 0


async def test_a_change_from_a_loop_thread_runs_on_the_stores_loop(
    pg_store: PostgresStore,
) -> None:
    """A LoopThread stops without cancelling its tasks: a write is not left on one."""
    request = make_request()
    await pg_store.create_request(request, created_events(request))
    portal = LoopThread("test-portal")
    seen: list[str] = []

    async def on_portal() -> bool:
        await pg_store.update_request(request.id, approving(seen))
        return on_a_loop_thread()

    try:
        assert await asyncio.wrap_future(portal.submit(on_portal())) is True
    finally:
        portal.stop()
    assert seen == [f"signoff-postgres:{pg_store.schema}"]
    stored = await pg_store.get_request(request.id)
    assert stored is not None and stored.status == "resolved"


async def test_one_pool_of_one_connection_serves_loops_on_three_threads(
    pg_url: str,
) -> None:
    store = PostgresStore(pg_url, schema=f"t_loops_{threading.get_ident()}", pool_max=1)
    await store.open()
    start = threading.Barrier(3)
    created: list[str] = []

    def agent(k: int) -> None:
        async def cycles() -> None:
            start.wait()
            for i in range(15):
                request = make_request(thread=f"loop-{k}-{i}")
                await store.create_request(request, created_events(request))
                await decide(store, request.id, decision(approver="alice"))
                created.append(request.id)

        asyncio.run(cycles())

    threads = [threading.Thread(target=agent, args=(k,)) for k in range(3)]
    try:
        for thread in threads:
            thread.start()
        await asyncio.to_thread(lambda: [t.join() for t in threads])
        assert len(created) == 45
        for request_id in created:
            row = await store.get_request(request_id)
            assert row is not None and row.status == "resolved"
        assert store.stats()["pool"]["in_use"] == 0
        assert (await store.verify_audit()).ok
    finally:
        await store.close()
        from tests.store import pg_cluster

        pg_cluster.drop_schema(pg_url, store.schema)


async def test_a_waiter_on_another_threads_loop_is_woken_by_a_decision_here(
    pg_store: PostgresStore,
) -> None:
    request = make_request()
    await pg_store.create_request(request, created_events(request))
    registered = threading.Event()
    outcome: list[ApprovalRequest] = []

    def waiter() -> None:
        async def wait() -> None:
            waiting = asyncio.create_task(pg_store.wait(request.id, timeout=30))
            while not pg_store.stats()["waiters"]:
                await asyncio.sleep(0)
            registered.set()
            outcome.append(await waiting)

        asyncio.run(wait())

    thread = threading.Thread(target=waiter)
    thread.start()
    await asyncio.to_thread(registered.wait, 30)
    await decide(pg_store, request.id, decision(approver="alice"))
    await asyncio.to_thread(thread.join, 30)
    assert [r.status for r in outcome] == ["resolved"]


async def test_a_slot_freed_on_one_loop_goes_to_a_waiter_on_another() -> None:
    slots = Slots(1)
    assert await slots.acquire(1.0)
    waiting = threading.Event()
    got: list[bool] = []

    def other_loop() -> None:
        async def take() -> None:
            acquiring = asyncio.create_task(slots.acquire(30.0))
            await asyncio.sleep(0)  # queued behind the holder
            waiting.set()
            got.append(await acquiring)
            slots.release()

        asyncio.run(take())

    thread = threading.Thread(target=other_loop)
    thread.start()
    await asyncio.to_thread(waiting.wait, 30)
    assert slots.in_use == 1
    slots.release()
    await asyncio.to_thread(thread.join, 30)
    assert got == [True]
    assert slots.in_use == 0


async def test_no_free_slot_in_time_is_a_clear_error_and_changes_nothing(
    pg_store: PostgresStore,
) -> None:
    connections = pg_store._connections
    assert connections is not None
    held = [await connections._slots.acquire(1.0) for _ in range(connections.max_size)]
    assert all(held)
    connections.timeout_s = 0.05
    request = make_request()
    try:
        with pytest.raises(StoreError, match="connections stayed busy"):
            await pg_store.create_request(request, created_events(request))
    finally:
        for _ in held:
            connections._slots.release()
        connections.timeout_s = pg_store.timeout_s
    assert await pg_store.get_request(request.id) is None
