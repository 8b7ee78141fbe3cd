"""The MemoryStore keeps every audit row and call-index entry for the life of the process:
they are stored as plain tuples of strings, ints and None, which the garbage collector stops
tracking after its first pass, so full collections do not walk them again and again (a
NamedTuple stays tracked). What the store gives back is unchanged."""

from __future__ import annotations

import gc

from signoff.store.audit import SealedRow
from signoff.store.memory import MemoryStore
from tests.store.factories import created_events, make_request


async def test_audit_rows_and_call_index_drop_out_of_the_collectors_view() -> None:
    store = MemoryStore()
    request = make_request(calls=[("call-1", "send_email", {"to": "bob@example.com"})])
    await store.create_request(request, created_events(request))
    await store.flush_audit()
    gc.collect()
    assert store._audit and not any(gc.is_tracked(row) for row in store._audit)
    assert not any(gc.is_tracked(entry) for entry in store._calls.values())
    # read back as before: SealedRows, records, the head, the idempotent lookup
    rows = store.sealed_rows()
    assert all(type(row) is SealedRow for row in rows)
    assert await store.audit_head() == (rows[-1].seq, rows[-1].hash)
    records = await store.read_audit()
    assert [r.seq for r in records] == [row.seq for row in rows]
    assert (await store.verify_audit()).ok
    assert await store.find_request_by_call("thread-1", "call-1") is request
    again, created = await store.create_request(request, created_events(request))
    assert again is request and not created
