"""A restarted RemoteGate agent re-attaches to the request it asked before, through the
server, and runs the approved call once (issue: hardening II, item 7)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from signoff import CallContext, Principal, ToolCall
from signoff.client import RemoteGate
from signoff.model import utcnow
from signoff.store import MemoryStore
from tests.gate.conftest import wait_until
from tests.server.conftest import POLICY, Server, start_server


@pytest.fixture
def server() -> Iterator[Server]:
    srv = start_server(MemoryStore(), POLICY + "gate: {lease: 0.5}\n")
    yield srv
    srv.close()


def test_a_restarted_remote_agent_reattaches_and_runs_once(server: Server) -> None:
    ctx = CallContext(principal=Principal("frank"), thread="t-9", agent="bot")
    args = {"amount": 50_000, "to": "ACME"}
    before = RemoteGate(server.url, server.tokens["bot"], poll_timeout=5)
    try:
        sub = before.submit([ToolCall("transfer_funds", args)], ctx)  # ... and it dies
        assert sub.request_id is not None
    finally:
        before.close()
    r = server.client("alice").post(
        f"/v1/requests/{sub.request_id}/decisions", json={"decisions": [{"type": "approve"}]}
    )
    assert r.status_code == 200 and r.json()["status"] == "resolved", r.text
    gate = server.gate
    wait_until(lambda: gate.run_sync(gate.get(sub.request_id)).lease_until < utcnow())
    after = RemoteGate(server.url, server.tokens["bot"], poll_timeout=5)
    ran: list[int] = []
    try:

        @after.guard
        def transfer_funds(amount: int, to: str) -> str:
            ran.append(amount)
            return "sent"

        with after.context(principal="frank", thread="t-9", agent="bot"):
            assert transfer_funds(amount=50_000, to="ACME") == "sent"
    finally:
        after.close()
    assert ran == [50_000]
    requests = gate.run_sync(gate.alist(thread="t-9"))
    assert len(requests) == 1 and requests[0].calls[0].execution == "executed"
