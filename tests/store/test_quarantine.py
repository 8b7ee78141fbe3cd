"""No poison, ever: a request row the store cannot read is quarantined, never fatal.

Issue 11, item 1: a request whose ``attrs`` (or ``args``) nest ~250 levels deep is stored,
and reading it back hits pydantic's recursion limit — which used to break every list, the
sweeper, notifications and start-up. The same must hold for any unreadable row: corrupt
JSON, a document that lost a field (schema drift, a manual edit), another request's
document. Real SQLite files and a real PostgreSQL (the throwaway cluster of the store tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from signoff.model import ApprovalRequest, NotFound, RequestQuarantined, StoreError, utcnow
from signoff.model.resolution import cancel
from signoff.store import MemoryStore, SQLiteStore, Store
from signoff.store.base import OutboxItem
from signoff.store.postgres import PostgresStore
from tests.store.conftest import BACKENDS, Backend
from tests.store.factories import created_events, decide, decision, make_request

pytestmark = pytest.mark.asyncio


def nested(depth: int) -> dict[str, Any]:
    """``{"a": {"a": … {}}}``, ``depth`` levels."""
    doc: dict[str, Any] = {}
    for _ in range(depth):
        doc = {"a": doc}
    return doc


@pytest.fixture(params=["sqlite", "postgresql"])
def durable(request: pytest.FixtureRequest) -> Backend:
    return BACKENDS[request.param]


@pytest.fixture
async def store(
    durable: Backend, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Store]:
    opened = durable.make(tmp_path, request)
    await opened.open()
    yield opened
    with contextlib.suppress(StoreError):
        await opened.close()
    durable.cleanup(opened)


def rewrite_doc(store: Store, request_id: str, doc: str) -> None:
    """Change a stored document behind the store's back (a manual edit, a bad restore)."""
    if isinstance(store, SQLiteStore):
        with contextlib.closing(sqlite3.connect(store.path)) as conn:
            conn.execute("UPDATE requests SET doc = ? WHERE id = ?", (doc, request_id))
            conn.commit()
        return
    assert isinstance(store, PostgresStore)
    with psycopg.connect(store.dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("UPDATE {}.requests SET doc = %s::json WHERE id = %s").format(
                sql.Identifier(store.schema)
            ),
            (doc, request_id),
        )


async def stored(store: Store, *, thread: str = "t-good", **kwargs: Any) -> ApprovalRequest:
    request = make_request(thread=thread, **kwargs)
    await store.create_request(request, created_events(request))
    return request


async def deep(store: Store, *, thread: str = "t-deep", **kwargs: Any) -> ApprovalRequest:
    """A request whose ``attrs`` nest 250 levels, written through the store API."""
    request = make_request(thread=thread, **kwargs)
    request.attrs = nested(250)
    await store.create_request(request, created_events(request))
    return request


def drifted(request: ApprovalRequest) -> str:
    """The document without a required field."""
    data = json.loads(request.model_dump_json())
    del data["thread"]
    return json.dumps(data)


# ---------------------------------------------------------------- the repro, and its cousins
async def test_a_request_nested_250_deep_is_stored_but_quarantined_when_read(store: Store) -> None:
    good = await stored(store)
    bad = await deep(store)
    assert [r.id for r in await store.list_requests()] == [good.id]
    with pytest.raises(RequestQuarantined) as caught:
        await store.get_request(bad.id)
    assert "recursion" in caught.value.reason
    assert f"signoff cancel {bad.id}" in str(caught.value)
    counts = await store.count_requests()
    assert (counts.pending, counts.quarantined) == (1, 1)


@pytest.mark.parametrize("kind", ["drift", "foreign", "corrupt"])
async def test_any_unreadable_row_is_left_out_of_lists_and_counts(store: Store, kind: str) -> None:
    good = await stored(store)
    bad = await stored(store, thread="t-bad")
    if kind == "drift":
        rewrite_doc(store, bad.id, drifted(bad))
    elif kind == "foreign":
        rewrite_doc(store, bad.id, good.model_dump_json())
    elif isinstance(store, PostgresStore):
        pytest.skip("a json column refuses corrupt JSON")
    else:
        rewrite_doc(store, bad.id, bad.model_dump_json()[:40])
    assert [r.id for r in await store.list_requests(status="pending")] == [good.id]
    assert [r.id for r in await store.list_requests(thread="t-bad")] == []
    with pytest.raises(RequestQuarantined):
        await store.get_request(bad.id)
    counts = await store.count_requests()
    assert (counts.pending, counts.quarantined) == (1, 1)
    [row] = await store.quarantined_requests()
    assert (row.id, row.thread, row.status) == (bad.id, "t-bad", "pending")


async def test_due_requests_leave_an_unreadable_due_row_out(store: Store) -> None:
    good = await stored(store, timeout_s=-10)
    bad = await deep(store, timeout_s=-20)  # due first
    assert await store.due_requests(utcnow()) == [good.id]
    assert await store.due_requests(utcnow()) == [good.id]
    assert await store.next_due_at() == good.due_at
    assert (await store.count_requests()).quarantined == 1
    assert [q.id for q in await store.quarantined_requests()] == [bad.id]


async def test_a_page_of_nothing_but_unreadable_due_rows_does_not_hide_the_rest(
    store: Store,
) -> None:
    for i in range(3):
        await deep(store, thread=f"t-deep-{i}", timeout_s=-60 + i)
    good = await stored(store, timeout_s=-10)
    assert await store.due_requests(utcnow(), limit=2) == [good.id]
    assert (await store.count_requests()).quarantined == 3


async def test_the_mark_survives_a_restart_and_other_stores_see_it(
    store: Store, durable: Backend
) -> None:
    bad = await deep(store)
    await store.list_requests()
    other = await durable.reopen(store)
    try:
        assert (await other.count_requests()).quarantined == 1
        [row] = await other.quarantined_requests()
        assert row.id == bad.id and "recursion" in row.reason
        assert await other.due_requests(utcnow() + timedelta(days=1)) == []
        assert await other.next_due_at() is None
    finally:
        await other.close()


async def test_an_unreadable_row_is_logged_once(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    bad = await deep(store, timeout_s=-5)
    with caplog.at_level(logging.ERROR, logger="signoff.store"):
        await store.list_requests()
        await store.list_requests()
        assert await store.due_requests(utcnow()) == []
        for _ in range(2):
            with pytest.raises(RequestQuarantined):
                await store.get_request(bad.id)
    logged = [r for r in caplog.records if "cannot be read" in r.getMessage()]
    assert len(logged) == 1
    assert bad.id in logged[0].getMessage() and "recursion" in logged[0].getMessage()


async def test_its_notifications_are_cancelled(store: Store) -> None:
    request = make_request(thread="t-deep")
    request.attrs = nested(250)
    item = OutboxItem(
        id=f"ob_{request.id}",
        request_id=request.id,
        channel="slack",
        kind="prompt",
        recipient="#approvals",
        next_at=utcnow(),
    )
    await store.create_request(request, created_events(request), [item])  # type: ignore[call-arg]
    await store.list_requests()
    outbox: Any = store
    assert [(i.status, i.error) for i in await outbox.outbox_for(request.id)] == [
        ("cancelled", "request quarantined: it cannot be read")
    ]
    assert await outbox.claim_outbox(utcnow() + timedelta(hours=1)) == []


async def test_updating_an_unreadable_row_raises_and_changes_nothing_else(store: Store) -> None:
    bad = await deep(store)
    with pytest.raises(RequestQuarantined):
        await decide(store, bad.id, decision())
    events = [r.event for r in await store.read_audit() if r.request_id == bad.id]
    assert events == ["created", "quarantined"]
    with pytest.raises(RequestQuarantined):  # marked now: refused again, audited once
        await decide(store, bad.id, decision())
    assert [r.event for r in await store.read_audit() if r.request_id == bad.id] == events


async def test_finding_it_by_call_or_submitting_it_again_raises(store: Store) -> None:
    bad = await deep(store)
    with pytest.raises(RequestQuarantined):
        await store.find_request_by_call(bad.thread, "call-1")
    again = make_request(thread=bad.thread)
    with pytest.raises(RequestQuarantined):
        await store.create_request(again, created_events(again))


# ---------------------------------------------------------------- closing it
async def test_cancel_quarantined_closes_it_without_parsing_and_audits(store: Store) -> None:
    bad = await deep(store)
    await store.list_requests()
    closed = await store.cancel_quarantined(bad.id, actor="ops", reason="poison")
    assert (closed.id, closed.status) == (bad.id, "cancelled")
    assert (await store.count_requests()).quarantined == 0
    [row] = await store.quarantined_requests()  # kept for the record
    assert row.status == "cancelled"
    audit = [r for r in await store.read_audit() if r.request_id == bad.id]
    assert [r.event for r in audit] == ["created", "quarantined", "cancelled"]
    assert audit[-1].actor == "ops" and audit[-1].data["reason"] == "poison"
    assert (await store.verify_audit()).ok
    again = await store.cancel_quarantined(bad.id, actor="ops")
    assert again.status == "cancelled"
    assert len([r for r in await store.read_audit() if r.request_id == bad.id]) == 3
    with pytest.raises(RequestQuarantined, match="already cancelled"):
        await store.get_request(bad.id)


async def test_cancel_quarantined_refuses_a_readable_or_unknown_row(store: Store) -> None:
    good = await stored(store)
    with pytest.raises(StoreError, match="not quarantined"):
        await store.cancel_quarantined(good.id, actor="ops")
    with pytest.raises(NotFound):
        await store.cancel_quarantined("req_nope", actor="ops")


async def test_a_repaired_row_is_released_by_the_next_read(store: Store) -> None:
    bad = await stored(store, thread="t-bad")
    original = bad.model_dump_json()
    rewrite_doc(store, bad.id, drifted(bad))
    assert await store.list_requests() == []
    rewrite_doc(store, bad.id, original)  # an operator restores the document
    assert (await store.get_request(bad.id)) == bad
    assert (await store.count_requests()).quarantined == 0
    assert [r.id for r in await store.list_requests()] == [bad.id]
    transition = await store.update_request(
        bad.id, lambda r: cancel(r, actor="ops", reason=None, now=utcnow())
    )
    assert transition.request.status == "cancelled"


async def test_waiters_of_a_row_another_store_quarantines_are_told(
    store: Store, durable: Backend
) -> None:
    bad = await stored(store, thread="t-bad")
    waiting = asyncio.ensure_future(store.wait(bad.id, timeout=30))
    await asyncio.sleep(0.3)  # registered and sleeping
    other = await durable.reopen(store)
    try:
        rewrite_doc(store, bad.id, drifted(bad))
        assert await other.list_requests() == []  # the other store finds and marks it
        with pytest.raises(RequestQuarantined):
            await asyncio.wait_for(waiting, 10)
    finally:
        await other.close()


# ---------------------------------------------------------------- every backend
@pytest.mark.parametrize("name", sorted(BACKENDS))
async def test_count_requests_counts_pending_requests(
    name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    backend = BACKENDS[name]
    store = backend.make(tmp_path, request)
    await store.open()
    try:
        first = await stored(store, thread="a")
        await stored(store, thread="b")
        await decide(store, first.id, decision())
        counts = await store.count_requests()
        assert (counts.pending, counts.quarantined) == (1, 0)
        assert await store.quarantined_requests() == []
        assert (await store.check()).ok
    finally:
        await store.close()
        backend.cleanup(store)


async def test_the_memory_store_never_quarantines() -> None:
    async with MemoryStore() as store:
        request = await stored(store)
        with pytest.raises(StoreError, match="not quarantined"):
            await store.cancel_quarantined(request.id, actor="ops")
        with pytest.raises(NotFound):
            await store.cancel_quarantined("req_nope", actor="ops")
