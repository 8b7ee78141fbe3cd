"""The agent's first long-poll starts from the request its submit created (one read less);
everything it answers is what a fresh read would answer (signoff.server.just_submitted)."""

from __future__ import annotations

import time

import pytest

from signoff import CallContext, Gate, Policy, Principal, ToolCall
from signoff.model import ApprovalRequest
from signoff.server.just_submitted import JustSubmitted
from signoff.store import MemoryStore
from tests.server.conftest import POLICY, Server

APPROVE = {"decisions": [{"type": "approve"}]}


@pytest.fixture(params=["server", "sqlite_server"])
def srv(request: pytest.FixtureRequest) -> Server:
    """The same checks on the MemoryStore and on SQLite."""
    server: Server = request.getfixturevalue(request.param)
    return server


def test_a_decision_between_submit_and_wait_answers_resolved_at_once(srv: Server) -> None:
    rid = srv.pending()
    assert srv.client("bob").post(f"/v1/requests/{rid}/decisions", json=APPROVE).status_code == 200
    r = srv.client("bot").get(f"/v1/requests/{rid}/wait", params={"timeout": 20})
    assert r.status_code == 200 and r.json()["status"] == "resolved"


def test_a_zero_timeout_wait_after_a_decision_reads_the_fresh_state(srv: Server) -> None:
    rid = srv.pending()
    srv.client("bob").post(f"/v1/requests/{rid}/decisions", json=APPROVE)
    r = srv.client("bot").get(f"/v1/requests/{rid}/wait", params={"timeout": 0})
    assert r.json()["status"] == "resolved"


def test_another_agents_wait_is_403_and_the_owner_still_waits(srv: Server) -> None:
    rid = srv.pending()
    r = srv.client("other-bot").get(f"/v1/requests/{rid}/wait", params={"timeout": 1})
    assert r.status_code == 403
    srv.client("bob").post(f"/v1/requests/{rid}/decisions", json=APPROVE)
    r = srv.client("bot").get(f"/v1/requests/{rid}/wait", params={"timeout": 20})
    assert r.json()["status"] == "resolved"


def test_the_first_long_poll_after_submit_takes_the_kept_request(srv: Server) -> None:
    rid = srv.pending()
    kept: JustSubmitted = srv.app.state.signoff.just_submitted
    assert rid in kept._kept
    r = srv.client("bot").get(f"/v1/requests/{rid}/wait", params={"timeout": 0.2})
    assert r.json()["status"] == "pending"
    assert rid not in kept._kept  # used once


def _request(thread: str = "t") -> ApprovalRequest:
    gate = Gate(Policy.from_yaml(POLICY), MemoryStore())
    call = ToolCall("transfer_funds", {"amount": 50_000, "to": "ACME"}, id="c1")
    ctx = CallContext(principal=Principal("frank"), thread=thread, agent="bot")
    try:
        sub = gate.submit([call], ctx)
    finally:
        gate.close()
    assert sub.request is not None and sub.request.pending
    return sub.request


def test_kept_requests_are_taken_once_by_their_agent_only() -> None:
    kept, req = JustSubmitted(), _request()
    kept.put(req)
    assert kept.take(req.id, "other-bot") is None
    assert kept.take(req.id, "bot") is req
    assert kept.take(req.id, "bot") is None


def test_a_kept_request_older_than_max_age_is_not_used() -> None:
    kept, req = JustSubmitted(max_age=0.0), _request()
    kept.put(req)
    time.sleep(0.001)  # older than max_age=0, whatever the clock's resolution
    assert kept.take(req.id, "bot") is None


def test_at_most_max_kept_requests_are_kept() -> None:
    kept = JustSubmitted(max_kept=2)
    reqs = [_request(f"t-{i}") for i in range(3)]
    for req in reqs:
        kept.put(req)
    assert kept.take(reqs[0].id, "bot") is None
    assert kept.take(reqs[2].id, "bot") is reqs[2]
