"""``/v1/requests``: every status code the API promises, against a real server."""

from __future__ import annotations

import threading
import time

from signoff.server.wire import RequestOut, SubmitOut
from tests.server.conftest import Server, transfer


# ---------------------------------------------------------------------- submit
def test_submit_that_needs_approval_is_201_with_verdicts_id_and_pending(server: Server) -> None:
    r = server.submit([transfer(), {"id": "call_2", "name": "get_price", "args": {}}])
    assert r.status_code == 201
    body = SubmitOut.model_validate(r.json())
    assert body.status == "pending" and body.id
    assert [(v.tool_call_id, v.verdict, v.rule) for v in body.verdicts] == [
        ("call_1", "require_approval", "large-transfer"),
        ("call_2", "allow", "get_price.default"),
    ]


def test_submit_retry_returns_the_same_request(server: Server) -> None:
    first = server.submit([transfer()])
    again = server.submit([transfer()])
    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["id"] == first.json()["id"]


def test_submit_with_only_allowed_and_denied_calls_stores_nothing(server: Server) -> None:
    r = server.submit([transfer(5), transfer(5_000_000, "call_2")])
    assert r.status_code == 200
    assert "id" not in r.json()
    assert [v["verdict"] for v in r.json()["verdicts"]] == ["allow", "deny"]
    assert r.json()["verdicts"][1]["reason"] == "above the hard limit"


def test_submit_same_call_id_with_other_args_is_409(server: Server) -> None:
    server.pending()
    r = server.submit([transfer(60_000)])
    assert r.status_code == 409 and r.json()["error"] == "idempotency_conflict"


def test_submit_without_token_is_401(server: Server) -> None:
    r = server.client().post("/v1/requests", json={"tool_calls": [transfer()]})
    assert r.status_code == 401
    assert "Bearer" in r.json()["message"] and r.headers["www-authenticate"] == "Bearer"


def test_unknown_token_is_401(server: Server) -> None:
    client = server.client()
    r = client.get("/v1/requests", headers={"Authorization": "Bearer so_agent_nope"})
    assert r.status_code == 401 and "unknown or was revoked" in r.json()["message"]


def test_approver_token_may_not_submit(server: Server) -> None:
    r = server.submit([transfer()], who="alice")
    assert r.status_code == 403 and "agent tokens" in r.json()["message"]


def test_context_agent_other_than_the_tokens_is_refused(server: Server) -> None:
    r = server.submit([transfer()], agent="billing-bot")
    assert r.status_code == 403
    assert r.json()["field"] == "context.agent"


def test_stored_request_carries_the_tokens_agent_name(server: Server) -> None:
    rid = server.pending()
    assert server.client("bot").get(f"/v1/requests/{rid}").json()["agent"] == "bot"


def test_malformed_submit_is_422_naming_the_field(server: Server) -> None:
    client = server.client("bot")
    r = client.post("/v1/requests", json={"tool_calls": [{"id": "c", "name": "x", "args": 3}]})
    assert r.status_code == 422 and r.json()["field"] == "tool_calls.0.args"
    r = client.post("/v1/requests", content=b"{not json")
    assert r.status_code == 422 and r.json()["field"] == "body"
    r = client.post("/v1/requests", json={"tool_calls": []})
    assert r.status_code == 422 and r.json()["field"] == "tool_calls"


def test_body_roles_are_ignored_without_trusted_roles(server: Server) -> None:
    # "ghost" is not in people:; claiming the finance role must not matter.
    calls = [{"id": "c1", "name": "pay_many", "args": {}}]
    body = {"tool_calls": calls, "context": {"principal": {"id": "ghost", "roles": ["finance"]}}}
    r = server.client("bot").post("/v1/requests", json=body)
    rid = r.json()["id"]
    req = server.client("alice").get(f"/v1/requests/{rid}").json()
    assert req["principal"] == {"id": "ghost", "roles": []}


def test_body_roles_are_used_from_trusted_agents_for_unlisted_principals_only() -> None:
    from signoff.store import MemoryStore
    from tests.server.conftest import start_server

    srv = start_server(MemoryStore(), agent_trusted=True)
    try:
        calls = [{"id": "c1", "name": "pay_many", "args": {}}]
        ghost = {"principal": {"id": "ghost", "roles": ["auditor"]}}
        frank = {"principal": {"id": "frank", "roles": ["admin"]}, "thread": "t-2"}
        bot = srv.client("bot")
        rid = bot.post("/v1/requests", json={"tool_calls": calls, "context": ghost}).json()["id"]
        assert bot.get(f"/v1/requests/{rid}").json()["principal"]["roles"] == ["auditor"]
        rid = bot.post("/v1/requests", json={"tool_calls": calls, "context": frank}).json()["id"]
        assert bot.get(f"/v1/requests/{rid}").json()["principal"]["roles"] == []  # directory wins
    finally:
        srv.close()


# ---------------------------------------------------------------------- read
def test_get_request_is_a_superset_of_langchains_hitl_request(server: Server) -> None:
    rid = server.pending()
    r = server.client("alice").get(f"/v1/requests/{rid}")
    assert r.status_code == 200
    body = r.json()
    RequestOut.model_validate(body)
    assert body["action_requests"][0]["name"] == "transfer_funds"
    assert body["review_configs"][0]["allowed_decisions"] == ["approve", "edit", "reject"]
    assert body["status"] == "pending" and body["deadline"] == body["expires_at"]
    assert body["matched_rules"] == [
        {"tool_call_id": "call_1", "rule": "large-transfer", "reason": None}
    ]
    assert body["quorum"] == [{"tool_call_id": "call_1", "required": 1, "approvals": []}]
    assert body["resolution"][0]["resolution"] is None


def test_unknown_request_is_404(server: Server) -> None:
    r = server.client("alice").get("/v1/requests/req_nope")
    assert r.status_code == 404 and r.json()["error"] == "not_found"


def test_agents_may_not_read_other_agents_requests(server: Server) -> None:
    rid = server.pending()
    assert server.client("other-bot").get(f"/v1/requests/{rid}").status_code == 403
    assert server.client("dave").get(f"/v1/requests/{rid}").status_code == 403  # not finance
    assert server.client("bob").get(f"/v1/requests/{rid}").status_code == 200


def test_list_filters_by_status_and_thread_and_visibility(server: Server) -> None:
    a = server.pending(thread="t-a")
    b = server.pending(call_id="call_2", thread="t-b")
    server.client("alice").post(
        f"/v1/requests/{a}/decisions", json={"decisions": [{"type": "approve"}]}
    )
    bob = server.client("bob")
    pending = bob.get("/v1/requests", params={"status": "pending"}).json()["requests"]
    assert [r["id"] for r in pending] == [b]
    thread_a = bob.get("/v1/requests", params={"thread": "t-a"}).json()["requests"]
    assert [r["id"] for r in thread_a] == [a]
    assert server.client("dave").get("/v1/requests").json()["requests"] == []
    assert server.client("other-bot").get("/v1/requests").json()["requests"] == []


def test_list_with_bad_status_is_422(server: Server) -> None:
    r = server.client("alice").get("/v1/requests", params={"status": "maybe"})
    assert r.status_code == 422 and r.json()["field"] == "status"


# ---------------------------------------------------------------------- decide
def test_approve_is_200_with_the_new_state_and_records_the_token_owner(server: Server) -> None:
    rid = server.pending()
    r = server.client("bob").post(
        f"/v1/requests/{rid}/decisions",
        json={"decisions": [{"tool_call_id": "call_1", "type": "approve", "message": "ok"}]},
    )
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "resolved"
    assert body["decisions"][0]["approver"] == "bob"
    assert body["decisions"][0]["channel"] == "api"
    assert (
        body["resolution"][0]["resolution"] == "approved" and body["resolution"][0]["by"] == "bob"
    )


def test_a_name_in_the_body_never_becomes_the_approver(server: Server) -> None:
    rid = server.pending()
    r = server.client("bob").post(
        f"/v1/requests/{rid}/decisions",
        json={"decisions": [{"type": "approve", "approver": "alice"}]},
    )
    assert r.status_code == 422  # unknown field; and nothing is stored
    assert server.client("bob").get(f"/v1/requests/{rid}").json()["decisions"] == []


def test_positional_decisions_and_a_bare_list_are_accepted(server: Server) -> None:
    rid = server.pending()
    r = server.client("bob").post(f"/v1/requests/{rid}/decisions", json=[{"type": "approve"}])
    assert r.status_code == 200 and r.json()["status"] == "resolved"


def test_second_decision_on_decided_request_is_409_saying_who_when_what(server: Server) -> None:
    rid = server.pending()
    server.client("bob").post(f"/v1/requests/{rid}/decisions", json=[{"type": "approve"}])
    r = server.client("carol").post(
        f"/v1/requests/{rid}/decisions", json=[{"type": "reject", "message": "no"}]
    )
    assert r.status_code == 409
    body = r.json()
    assert body["error"] == "already_decided" and body["by"] == "bob" and body["at"]
    assert body["outcome"] and "bob" in body["message"]
    assert body["resolution"][0]["resolution"] == "approved"
    assert body["resolution"][0]["by"] == "bob"


def test_repeating_the_same_decision_is_harmless(server: Server) -> None:
    rid = server.pending()
    bob = server.client("bob")
    first = bob.post(f"/v1/requests/{rid}/decisions", json=[{"type": "approve"}])
    again = bob.post(f"/v1/requests/{rid}/decisions", json=[{"type": "approve"}])
    assert first.status_code == 200 and again.status_code in (200, 409)
    assert len(bob.get(f"/v1/requests/{rid}").json()["decisions"]) == 1


def test_approver_without_the_role_gets_403_and_nothing_is_stored(server: Server) -> None:
    rid = server.pending()
    r = server.client("dave").post(f"/v1/requests/{rid}/decisions", json=[{"type": "approve"}])
    assert r.status_code == 403 and "finance" in r.json()["message"]
    assert server.gate.store is not None
    assert server.client("alice").get(f"/v1/requests/{rid}").json()["decisions"] == []


def test_self_approval_is_403(server: Server) -> None:
    rid = server.pending(principal="erin")  # erin holds finance, but it is her own call
    r = server.client("erin").post(f"/v1/requests/{rid}/decisions", json=[{"type": "approve"}])
    assert r.status_code == 403
    assert server.client("alice").get(f"/v1/requests/{rid}").json()["status"] == "pending"


def test_agent_tokens_may_not_decide(server: Server) -> None:
    rid = server.pending()
    r = server.client("bot").post(f"/v1/requests/{rid}/decisions", json=[{"type": "approve"}])
    assert r.status_code == 403


def test_invalid_decision_is_422_naming_the_field_and_stores_nothing(server: Server) -> None:
    rid = server.pending()
    bob = server.client("bob")
    cases = [
        ([{"tool_call_id": "call_1", "type": "respond", "message": "x"}], "decisions[0].type"),
        ([{"tool_call_id": "nope", "type": "approve"}], "decisions[0].tool_call_id"),
        ([{"tool_call_id": "call_1", "type": "maybe"}], "decisions[0].type"),
        (
            [
                {
                    "tool_call_id": "call_1",
                    "type": "edit",
                    "edited_action": {
                        "name": "transfer_funds",
                        "args": {"to": "EVIL", "amount": 1},
                    },
                }
            ],
            "decisions[0].edited_action.args.to",
        ),
        (
            [
                {
                    "tool_call_id": "call_1",
                    "type": "edit",
                    "edited_action": {
                        "name": "transfer_funds",
                        "args": {"to": "ACME", "amount": 5_000_000},
                    },
                }
            ],
            "decisions[0].edited_action.args",
        ),
        ({"decisions": "approve"}, "decisions"),
        ({"decisions": [], "extra": 1}, "extra"),
    ]
    for body, field in cases:
        r = bob.post(f"/v1/requests/{rid}/decisions", json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["field"] == field, (body, r.json())
    req = bob.get(f"/v1/requests/{rid}").json()
    assert req["status"] == "pending" and req["decisions"] == []


def test_edit_is_recorded_with_the_edited_arguments(server: Server) -> None:
    rid = server.pending()
    edited = {"name": "transfer_funds", "args": {"amount": 20_000, "to": "ACME"}}
    r = server.client("bob").post(
        f"/v1/requests/{rid}/decisions",
        json=[{"tool_call_id": "call_1", "type": "edit", "edited_action": edited}],
    )
    assert r.status_code == 200
    assert r.json()["calls"][0]["resolution"] == "edited"
    assert r.json()["calls"][0]["action"]["args"]["amount"] == 20_000


def test_decisions_on_unknown_request_are_404(server: Server) -> None:
    r = server.client("bob").post("/v1/requests/req_nope/decisions", json=[{"type": "approve"}])
    assert r.status_code == 404


def test_quorum_progress_is_shown_until_the_second_approval(server: Server) -> None:
    r = server.submit([{"id": "c1", "name": "pay_many", "args": {}}])
    rid = r.json()["id"]
    once = server.client("bob").post(f"/v1/requests/{rid}/decisions", json=[{"type": "approve"}])
    assert once.json()["status"] == "pending"
    assert once.json()["quorum"] == [{"tool_call_id": "c1", "required": 2, "approvals": ["bob"]}]
    twice = server.client("carol").post(f"/v1/requests/{rid}/decisions", json=[{"type": "approve"}])
    assert twice.json()["status"] == "resolved"


def test_thread_scope_approves_later_calls_on_the_thread(server: Server) -> None:
    rid = server.pending()
    decided = server.client("bob").post(
        f"/v1/requests/{rid}/decisions", json=[{"type": "approve", "scope": "thread"}]
    )
    [grant] = decided.json()["grants"]
    later = server.submit([transfer(60_000, "call_9")])
    # a grant decides at the check: allowed at once, nothing stored, the grant named
    assert later.status_code == 200 and "id" not in later.json()
    [verdict] = later.json()["verdicts"]
    assert verdict["verdict"] == "allow" and verdict["grant"] == grant["id"]


# ---------------------------------------------------------------------- wait
def test_wait_returns_as_soon_as_the_request_is_decided(server: Server) -> None:
    rid = server.pending()
    answers: list[dict[str, object]] = []

    def waiter() -> None:
        answers.append(server.client("bot").get(f"/v1/requests/{rid}/wait?timeout=30").json())

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.2)
    started = time.monotonic()
    server.client("bob").post(f"/v1/requests/{rid}/decisions", json=[{"type": "approve"}])
    thread.join(timeout=20)
    assert answers and answers[0]["status"] == "resolved"
    assert time.monotonic() - started < 15  # far less than the 30 s timeout, not a tight bound


def test_wait_times_out_with_the_current_state(server: Server) -> None:
    rid = server.pending()
    r = server.client("bot").get(f"/v1/requests/{rid}/wait", params={"timeout": 0.1})
    assert r.status_code == 200 and r.json()["status"] == "pending"


def test_wait_with_bad_timeout_is_422(server: Server) -> None:
    rid = server.pending()
    for bad in ("-1", "soon", "nan", "100000"):
        r = server.client("bot").get(f"/v1/requests/{rid}/wait", params={"timeout": bad})
        assert r.status_code == 422 and r.json()["field"] == "timeout", bad


def test_wait_on_someone_elses_request_is_403(server: Server) -> None:
    rid = server.pending()
    assert server.client("other-bot").get(f"/v1/requests/{rid}/wait?timeout=0").status_code == 403


# ---------------------------------------------------------------------- cancel / execution
def test_the_agent_cancels_its_request(server: Server) -> None:
    rid = server.pending()
    r = server.client("bot").post(f"/v1/requests/{rid}/cancel", json={"reason": "user left"})
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    assert r.json()["calls"][0]["resolved_by"] == "bot"


def test_cancel_by_non_admin_approver_or_other_agent_is_403(server: Server) -> None:
    rid = server.pending()
    assert server.client("bob").post(f"/v1/requests/{rid}/cancel").status_code == 403
    assert server.client("other-bot").post(f"/v1/requests/{rid}/cancel").status_code == 403
    assert server.client("alice").post(f"/v1/requests/{rid}/cancel").status_code == 200  # admin


def test_cancel_after_a_decision_is_409(server: Server) -> None:
    rid = server.pending()
    server.client("bob").post(f"/v1/requests/{rid}/decisions", json=[{"type": "approve"}])
    r = server.client("bot").post(f"/v1/requests/{rid}/cancel")
    assert r.status_code == 409 and r.json()["by"] == "bob"


def test_execution_is_claimed_exactly_once(server: Server) -> None:
    rid = server.pending()
    server.client("bob").post(f"/v1/requests/{rid}/decisions", json=[{"type": "approve"}])
    bot = server.client("bot")
    url = f"/v1/requests/{rid}/calls/call_1/execution"
    assert bot.post(url, json={"state": "executing"}).status_code == 200
    second = bot.post(url, json={"state": "executing"})
    assert second.status_code == 409 and second.json()["error"] == "already_executed"
    done = bot.post(url, json={"state": "executed"})
    assert done.json()["calls"][0]["execution"] == "executed"
    assert (
        bot.post(
            f"/v1/requests/{rid}/calls/nope/execution", json={"state": "executing"}
        ).status_code
        == 404
    )


def test_a_rejected_call_cannot_be_claimed(server: Server) -> None:
    rid = server.pending()
    server.client("bob").post(
        f"/v1/requests/{rid}/decisions", json=[{"type": "reject", "message": "no"}]
    )
    r = server.client("bot").post(
        f"/v1/requests/{rid}/calls/call_1/execution", json={"state": "executing"}
    )
    assert r.status_code == 409


# ---------------------------------------------------------------------- inquiries
def test_inquiry_is_a_request_answered_with_respond(server: Server) -> None:
    r = server.client("bot").post(
        "/v1/inquiries",
        json={
            "question": "Which region?",
            "choices": ["eu", "us"],
            "default_answer": "eu",
            "context": {"principal": {"id": "frank"}, "thread": "t-q"},
        },
    )
    assert r.status_code == 201
    body = r.json()
    assert body["kind"] == "inquiry"
    assert body["inquiry"] == {
        "question": "Which region?",
        "choices": ["eu", "us"],
        "default_answer": "eu",
    }
    listed = server.client("dave").get("/v1/requests", params={"kind": "inquiry"}).json()
    assert [q["id"] for q in listed["requests"]] == [body["id"]]
    answer = server.client("dave").post(
        f"/v1/requests/{body['id']}/decisions", json=[{"type": "respond", "message": "us"}]
    )
    assert answer.status_code == 200
    assert answer.json()["resolution"][0] == {
        **answer.json()["resolution"][0],
        "resolution": "responded",
        "message": "us",
    }


def test_me_names_the_tokens_person_and_roles(server: Server) -> None:
    r = server.client("alice").get("/v1/me")
    assert r.status_code == 200
    assert r.json() == {
        "kind": "approver",
        "name": "alice",
        "roles": ["admin", "finance"],
        "admin": True,
    }
    assert server.client("bot").get("/v1/me").json()["kind"] == "agent"
    assert server.client().get("/v1/me").status_code == 401
