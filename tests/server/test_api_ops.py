"""Events (SSE), audit, health, metrics, identity: the API around the requests."""

from __future__ import annotations

import json
import queue
import threading
from pathlib import Path
from typing import Any

import httpx

from signoff.store import MemoryStore
from tests.server.conftest import Server, start_server, transfer


class EventReader:
    """Reads ``/v1/events`` in a thread; ``next()`` returns the next event's data."""

    def __init__(self, server: Server, who: str) -> None:
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.ready = threading.Event()
        self.client = server.client(who, timeout=httpx.Timeout(30, read=None))
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    def _run(self) -> None:
        try:
            with self.client.stream("GET", "/v1/events") as response:
                for line in response.iter_lines():
                    if line.startswith(": connected"):
                        self.ready.set()
                    elif line.startswith("data:"):
                        self.events.put(json.loads(line[5:]))
        except httpx.HTTPError:
            pass

    def next(self, timeout: float = 10) -> dict[str, Any]:
        return self.events.get(timeout=timeout)

    def empty_after(self, marker: dict[str, Any]) -> bool:
        return self.events.empty()


def test_events_stream_created_and_decided(server: Server) -> None:
    reader = EventReader(server, "bob")
    rid = server.pending()
    created = reader.next()
    assert created["type"] == "created" and created["id"] == rid
    assert created["tools"] == ["transfer_funds"] and created["agent"] == "bot"
    server.client("carol").post(f"/v1/requests/{rid}/decisions", json=[{"type": "approve"}])
    decided = reader.next()
    assert decided["type"] == "decided" and decided["status"] == "resolved"
    assert decided["by"] == "carol"


def test_events_are_filtered_to_what_the_caller_may_see(server: Server) -> None:
    ops = EventReader(server, "dave")
    finance = EventReader(server, "bob")
    server.pending()
    deploy = server.submit([{"id": "d1", "name": "deploy", "args": {}}], thread="t-d")
    assert finance.next()["tools"] == ["transfer_funds"]
    seen = ops.next()
    assert seen["tools"] == ["deploy"] and seen["id"] == deploy.json()["id"]
    server.client("dave").post(f"/v1/requests/{seen['id']}/cancel")  # not allowed: 403
    server.client("bot").post(f"/v1/requests/{seen['id']}/cancel")
    assert ops.next()["type"] == "cancelled"
    assert finance.events.empty()


def test_events_need_credentials(server: Server) -> None:
    assert server.client().get("/v1/events").status_code == 401


def test_audit_lists_rows_and_exports_jsonl(server: Server) -> None:
    rid = server.pending()
    server.submit([transfer(5, "call_small")], thread="t-2")
    server.client("bob").post(f"/v1/requests/{rid}/decisions", json=[{"type": "approve"}])
    alice = server.client("alice")
    page = alice.get("/v1/audit", params={"request_id": rid}).json()
    assert [r["event"] for r in page["records"]] == ["created", "decided", "resolved"]
    assert page["records"][1]["actor"] == "bob"
    everything = alice.get("/v1/audit", params={"format": "jsonl"})
    assert everything.headers["content-type"].startswith("application/x-ndjson")
    rows = [json.loads(line) for line in everything.text.splitlines()]
    assert "allowed" in {r["event"] for r in rows}
    assert all(r["hash"] for r in rows)


def test_non_admin_approvers_see_audit_rows_of_their_requests_only(server: Server) -> None:
    rid = server.pending()
    server.submit([transfer(5, "call_small")], thread="t-2")
    bob_rows = server.client("bob").get("/v1/audit").json()["records"]
    assert bob_rows and {r["request_id"] for r in bob_rows} == {rid}
    assert server.client("dave").get("/v1/audit").json()["records"] == []


def test_agents_may_not_read_the_audit_log(server: Server) -> None:
    assert server.client("bot").get("/v1/audit").status_code == 403


def test_audit_filter_with_bad_time_is_422(server: Server) -> None:
    r = server.client("alice").get("/v1/audit", params={"since": "yesterday"})
    assert r.status_code == 422 and r.json()["field"] == "since"


def test_healthz_and_metrics(server: Server) -> None:
    client = server.client()
    assert client.get("/healthz").json() == {"status": "ok"}
    rid = server.pending()
    server.pending(call_id="call_2", thread="t-2")
    server.client("bob").post(f"/v1/requests/{rid}/decisions", json=[{"type": "approve"}])
    text = client.get("/metrics").text
    assert "signoff_pending_requests 1" in text
    assert 'signoff_decisions_total{type="approve",channel="api"} 1' in text
    assert "signoff_time_to_decision_seconds_count 1" in text
    assert "# TYPE signoff_notification_failures_total counter" in text


def test_notification_failures_are_counted(tmp_path: Path) -> None:
    class Broken:
        name = "broken"

        async def notify(self, request: Any, gate: Any) -> None:
            raise RuntimeError("smtp down")

        async def resolved(self, request: Any, gate: Any) -> None:
            return None

    srv = start_server(MemoryStore())
    try:
        srv.gate.channels.append(Broken())
        from signoff.server.metrics import count_channel_failures

        count_channel_failures(srv.gate, srv.app.state.signoff.metrics)
        srv.pending()
        text = srv.client().get("/metrics").text
        assert 'signoff_notification_failures_total{channel="broken"} 1' in text
    finally:
        srv.close()


def test_revoked_token_is_401(server: Server) -> None:
    from signoff.server import revoke_token

    db = server.app.state.signoff.db
    assert server.run(revoke_token(db, server.tokens["bob"]))
    r = server.client("bob").get("/v1/requests")
    assert r.status_code == 401


def test_trusted_proxy_header_is_honoured_from_listed_addresses_only() -> None:
    trusted = start_server(MemoryStore(), auth={"trusted_proxy": {"addresses": ["127.0.0.1"]}})
    untrusted = start_server(MemoryStore(), auth={"trusted_proxy": {"addresses": ["10.0.0.0/8"]}})
    try:
        rid = trusted.pending()
        headers = {"X-Forwarded-Email": "alice@example.com"}
        r = trusted.client().get(f"/v1/requests/{rid}", headers=headers)
        assert r.status_code == 200
        r = trusted.client().get("/v1/requests", headers={"X-Forwarded-User": "mallory"})
        assert r.status_code == 403 and "people" in r.json()["message"]
        r = untrusted.client().get("/v1/requests", headers={"X-Forwarded-User": "alice"})
        assert r.status_code == 401
    finally:
        trusted.close()
        untrusted.close()


def test_proxy_authenticated_posts_need_the_csrf_token() -> None:
    srv = start_server(MemoryStore(), auth={"trusted_proxy": {"addresses": ["127.0.0.1"]}})
    try:
        rid = srv.pending()
        client = srv.client(headers={"X-Forwarded-User": "bob"})
        r = client.post(f"/v1/requests/{rid}/decisions", json=[{"type": "approve"}])
        assert r.status_code == 403 and r.json()["error"] == "csrf_failed"
        from signoff.server.csrf import csrf_token

        token = csrf_token(srv.app.state.signoff.secret, "proxy:bob")
        r = client.post(
            f"/v1/requests/{rid}/decisions",
            json=[{"type": "approve"}],
            headers={"X-CSRF-Token": token},
        )
        assert r.status_code == 200 and r.json()["decisions"][0]["channel"] == "web"
    finally:
        srv.close()


def test_unknown_route_is_a_json_404(server: Server) -> None:
    r = server.client().get("/v1/nothing")
    assert r.status_code == 404 and r.json()["error"] == "not_found"
