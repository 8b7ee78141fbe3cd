"""No poison, ever — on a real server (uvicorn on 127.0.0.1, a real SQLite file).

Issue 11, item 1: a request nested ~250 levels deep used to be stored (201) and then break
``GET /v1/requests``, ``/inbox`` and ``/metrics`` for everyone, and ``signoff serve`` refused
to start once it was due. Input limits now refuse such input at the door; the policy below
raises the limit so the poison still reaches the store, and the store must contain it.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from signoff.store import SQLiteStore
from tests.server.conftest import POLICY, Server, start_server
from tests.server.test_inbox_forms import sign_in
from tests.store.factories import created_events, make_request

DEEP_POLICY = POLICY + "limits:\n  max_json_depth: 1000\n"


def nested(depth: int) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for _ in range(depth):
        doc = {"a": doc}
    return doc


def gauge(server: Server, name: str) -> int:
    text = server.client().get("/metrics").text
    match = re.search(rf"^{name} (\d+)$", text, re.MULTILINE)
    assert match, text
    return int(match.group(1))


@pytest.fixture
def deep_server(tmp_path: Path) -> Any:
    srv = start_server(SQLiteStore(tmp_path / "signoff.db"), DEEP_POLICY)
    yield srv
    srv.close()


def test_requests_and_inquiries_nested_250_deep_never_break_the_server(
    deep_server: Server,
) -> None:
    server = deep_server
    good = server.pending(thread="t-good")
    posted = [
        server.client("bot").post(
            "/v1/inquiries",
            json={
                "question": "Which region?",
                "context": {"principal": {"id": "frank"}, "thread": "t-q", "attrs": nested(250)},
            },
        ),
        server.submit(
            [
                {
                    "id": "c-args",
                    "name": "transfer_funds",
                    "args": {"amount": 50_000, "to": nested(250)},
                }
            ],
            thread="t-args",
        ),
        server.pending(call_id="c-attrs", thread="t-attrs", attrs=nested(250)),
    ]
    poisoned = [r.json()["id"] for r in posted[:2]] + [posted[2]]
    bob = server.client("bob")
    listed = bob.get("/v1/requests")
    assert listed.status_code == 200
    assert [r["id"] for r in listed.json()["requests"]] == [good]
    assert good in sign_in(server, "bob").get("/inbox").text
    for rid in poisoned:
        answer = bob.get(f"/v1/requests/{rid}")
        assert answer.status_code == 409
        assert answer.json()["error"] == "quarantined" and "recursion" in answer.json()["message"]
    assert server.client().get("/healthz").json() == {"status": "ok"}
    assert gauge(server, "signoff_pending_requests") == 1
    assert gauge(server, "signoff_quarantined_requests") == 3


def test_a_row_damaged_behind_the_servers_back_is_quarantined(
    sqlite_server: Server, tmp_path: Path
) -> None:
    server = sqlite_server
    good = server.pending(thread="t-good")
    bad = server.pending(call_id="call_2", thread="t-bad")
    with contextlib.closing(sqlite3.connect(tmp_path / "signoff.db")) as conn:
        conn.execute("UPDATE requests SET doc = '{\"id\": ' WHERE id = ?", (bad,))
        conn.commit()
    bob = server.client("bob")
    assert [r["id"] for r in bob.get("/v1/requests").json()["requests"]] == [good]
    answer = bob.get(f"/v1/requests/{bad}")
    assert answer.status_code == 409 and answer.json()["request_id"] == bad
    page = sign_in(server, "bob").get(f"/requests/{bad}")
    assert page.status_code == 409 and "quarantined" in page.text
    decided = bob.post(f"/v1/requests/{bad}/decisions", json=[{"type": "approve"}])
    assert decided.status_code == 409 and decided.json()["error"] == "quarantined"
    assert gauge(server, "signoff_quarantined_requests") == 1
    # the API closes it too, for admins (nobody can tell which agent made an unreadable row)
    assert bob.post(f"/v1/requests/{bad}/cancel", json={}).status_code == 409
    closed = server.client("alice").post(f"/v1/requests/{bad}/cancel", json={"reason": "junk"})
    assert closed.status_code == 200 and closed.json()["status"] == "cancelled"
    assert closed.json()["quarantined"] is True


def test_a_due_unreadable_row_does_not_stop_the_server_starting(tmp_path: Path) -> None:
    path = tmp_path / "signoff.db"
    good = make_request(thread="t-good", timeout_s=-5)
    bad = make_request(thread="t-bad", timeout_s=-10)
    bad.attrs = nested(250)

    async def seed() -> None:
        async with SQLiteStore(path) as store:
            for request in (good, bad):
                await store.create_request(request, created_events(request))

    asyncio.run(seed())
    server = start_server(SQLiteStore(path))
    try:
        assert server.client().get("/healthz").status_code == 200
        expired = server.client("bob").get(f"/v1/requests/{good.id}")
        assert expired.json()["status"] == "expired"  # the start-up sweep went past the bad row
        assert server.client("bob").get(f"/v1/requests/{bad.id}").status_code == 409
        assert gauge(server, "signoff_quarantined_requests") == 1
    finally:
        server.close()


def test_metrics_read_counts_from_the_store_at_most_once_a_second(sqlite_server: Server) -> None:
    server = sqlite_server
    for i in range(3):
        server.pending(call_id=f"call_{i}", thread=f"t-{i}")
    client = server.client()
    started = time.monotonic()
    for _ in range(20):
        assert "signoff_pending_requests 3\n" in client.get("/metrics").text
    elapsed = time.monotonic() - started  # 20 local scrapes: well under a second, unless busy
    assert server.app.state.signoff.metrics.counts.queries <= 1 + int(elapsed)
