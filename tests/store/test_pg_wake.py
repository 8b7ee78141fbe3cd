"""Waking across processes on PostgreSQL: LISTEN/NOTIFY as the hint, the row as the truth."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable

import psycopg
from psycopg import sql

from signoff.model import ApprovalRequest, utcnow
from signoff.model.resolution import apply_decisions
from signoff.store.postgres import PostgresStore
from tests.store.factories import created_events, decide, decision, make_request, subprocess_env


async def stored(store: PostgresStore, **kw: object) -> ApprovalRequest:
    request = make_request(**kw)  # type: ignore[arg-type]
    await store.create_request(request, created_events(request))
    return request


def decide_in_another_process(store: PostgresStore, request_id: str, approver: str) -> str:
    ids = (request_id, approver)
    done = subprocess.run(
        [sys.executable, "-m", "tests.store.pg_worker", "decide", store.dsn, store.schema, *ids],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


async def parked(store: PostgresStore, request_id: str) -> asyncio.Task[ApprovalRequest]:
    """A task waiting on ``request_id``, once it is subscribed and has read its row."""
    waiter = asyncio.create_task(store.wait(request_id, timeout=60))
    for _ in range(500):
        if store.stats()["waiters"] and store.stats()["listening"]:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    assert not waiter.done()
    return waiter


def terminate_listener(store: PostgresStore) -> None:
    pid = store._listener.backend_pid if store._listener else None
    assert pid is not None
    with psycopg.connect(store.dsn, autocommit=True) as conn:
        assert conn.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)


async def test_decision_in_another_process_wakes_the_waiter(pg_store: PostgresStore) -> None:
    request = await stored(pg_store)
    waiter = await parked(pg_store, request.id)
    assert await asyncio.to_thread(decide_in_another_process, pg_store, request.id, "carol")
    done = await asyncio.wait_for(waiter, 30)
    assert (done.status, done.decisions[0].approver) == ("resolved", "carol")
    await until(lambda: pg_store.stats()["cross_process_wakes"] == 1)


async def test_a_killed_listener_reconnects_and_the_waiter_still_wakes(
    pg_store: PostgresStore,
) -> None:
    request = await stored(pg_store)
    waiter = await parked(pg_store, request.id)
    assert pg_store._listener is not None
    pg_store._listener.first_delay_s = 0.5  # a wide gap, so the decision surely falls into it
    terminate_listener(pg_store)
    await until(lambda: not pg_store.stats()["listening"])
    async with PostgresStore(pg_store.dsn, schema=pg_store.schema) as other:
        await decide(other, request.id, decision(approver="dave"))  # its NOTIFY is lost
    done = await asyncio.wait_for(waiter, 30)
    assert done.status == "resolved"
    await until(lambda: pg_store.stats()["rechecked_wakes"] == 1)  # counted after the wake
    assert pg_store.stats()["listener_connects"] == 2


async def until(condition: Callable[[], object], timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.005)):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition never became true")


async def test_a_change_nobody_notified_is_found_by_the_safety_recheck(pg_url: str) -> None:
    store = PostgresStore(pg_url, schema="wake_recheck", recheck_s=0.3)
    try:
        request = await stored(store)
        waiter = await parked(store, request.id)
        resolved = apply_decisions(request, [decision()], approver_roles=(), now=utcnow()).request
        with psycopg.connect(pg_url, autocommit=True) as conn:  # a writer that forgot NOTIFY
            conn.execute(
                sql.SQL("UPDATE {}.requests SET doc = %s::json, status = %s WHERE id = %s").format(
                    sql.Identifier(store.schema)
                ),
                (resolved.model_dump_json(), resolved.status, request.id),
            )
        done = await asyncio.wait_for(waiter, 10)
        assert done.status == "resolved"
        await until(lambda: store.stats()["rechecked_wakes"] == 1)
    finally:
        await store.close()
        from tests.store.pg_cluster import drop_schema

        drop_schema(pg_url, "wake_recheck")


async def test_listeners_hear_changes_made_by_another_store(pg_store: PostgresStore) -> None:
    heard: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    pg_store.add_listener(
        lambda req, event: loop.call_soon_threadsafe(heard.put_nowait, (req.id, event))
    )
    async with PostgresStore(pg_store.dsn, schema=pg_store.schema) as other:
        await until(lambda: pg_store.stats()["listening"])
        request = await stored(other)
        await decide(other, request.id, decision(approver="erin"))
    got = [await asyncio.wait_for(heard.get(), 30) for _ in range(2)]
    assert got == [(request.id, "created"), (request.id, "resolved")]


async def test_listeners_hear_once_what_changed_while_listen_was_down(
    pg_store: PostgresStore,
) -> None:
    heard: list[tuple[str, str]] = []
    pg_store.add_listener(lambda req, event: heard.append((req.id, event)))
    async with PostgresStore(pg_store.dsn, schema=pg_store.schema) as other:
        await until(lambda: pg_store.stats()["listening"])
        request = await stored(other)
        await until(lambda: heard)
        assert pg_store._listener is not None
        pg_store._listener.first_delay_s = 0.5
        terminate_listener(pg_store)
        await until(lambda: not pg_store.stats()["listening"])
        await decide(other, request.id, decision(approver="erin"))  # unheard: replayed later
        await until(lambda: len(heard) >= 2)
        await asyncio.sleep(0.2)  # nothing more arrives
    assert heard == [(request.id, "created"), (request.id, "resolved")]
    assert pg_store.stats()["replayed_to_listeners"] == 1
