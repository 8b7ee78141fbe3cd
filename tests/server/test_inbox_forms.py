"""The web inbox over plain HTTP: sign-in, sessions, CSRF, the decision forms."""

from __future__ import annotations

import re

import httpx

from tests.server.conftest import Server


def sign_in(server: Server, who: str) -> httpx.Client:
    client = server.client()
    page = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf
    r = client.post(
        "/login",
        data={"token": server.tokens[who], "csrf": csrf.group(1)},
        headers={"Origin": server.url},
    )
    assert r.status_code == 303, r.text
    return client


def csrf_of(client: httpx.Client, path: str = "/inbox") -> str:
    match = re.search(r'data-csrf="([^"]+)"', client.get(path).text)
    assert match
    return match.group(1)


def form_post(
    client: httpx.Client, server: Server, path: str, data: dict[str, str]
) -> httpx.Response:
    return client.post(path, data=data, headers={"Origin": server.url})


def test_pages_need_a_signed_in_person(server: Server) -> None:
    for path in ("/inbox", "/history", "/audit", "/requests/req_x"):
        r = server.client().get(path)
        assert r.status_code == 303 and r.headers["location"] == "/login", path


def test_sign_in_with_a_token_sets_a_safe_session_cookie(server: Server) -> None:
    client = server.client()
    page = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf
    r = client.post(
        "/login",
        data={"token": server.tokens["bob"], "csrf": csrf.group(1)},
        headers={"Origin": server.url},
    )
    cookie = r.headers["set-cookie"]
    assert "signoff_session=" in cookie and "HttpOnly" in cookie and "SameSite=lax" in cookie
    assert "Secure" not in cookie  # plain http on loopback
    assert "signed in as <strong>bob</strong>" in client.get("/inbox").text


def test_sign_in_needs_the_forms_csrf_token(server: Server) -> None:
    client = server.client()
    client.get("/login")
    r = client.post("/login", data={"token": server.tokens["bob"]}, headers={"Origin": server.url})
    assert r.status_code == 403 and "signoff_session" not in r.headers.get("set-cookie", "")


def test_agent_tokens_cannot_sign_in(server: Server) -> None:
    client = server.client()
    page = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf
    r = client.post(
        "/login",
        data={"token": server.tokens["bot"], "csrf": csrf.group(1)},
        headers={"Origin": server.url},
    )
    assert r.status_code == 403 and "agent tokens" in r.text


def test_inbox_lists_what_the_person_may_decide(server: Server) -> None:
    rid = server.pending()
    bob = sign_in(server, "bob")
    assert rid in bob.get("/inbox").text
    assert rid in bob.get("/inbox?partial=1").text
    dave = sign_in(server, "dave")
    assert rid not in dave.get("/inbox").text


def test_deciding_by_form_needs_the_csrf_token(server: Server) -> None:
    rid = server.pending()
    bob = sign_in(server, "bob")
    data = {"tool_call_id": "call_1", "type": "approve"}
    r = form_post(bob, server, f"/requests/{rid}/decide", data)
    assert r.status_code == 403
    r = form_post(bob, server, f"/requests/{rid}/decide", {**data, "csrf": "forged"})
    assert r.status_code == 403
    assert server.client("alice").get(f"/v1/requests/{rid}").json()["status"] == "pending"
    r = form_post(bob, server, f"/requests/{rid}/decide", {**data, "csrf": csrf_of(bob)})
    assert r.status_code == 303
    req = server.client("alice").get(f"/v1/requests/{rid}").json()
    assert req["status"] == "resolved" and req["decisions"][0]["channel"] == "web"


def test_session_api_posts_need_the_csrf_header_and_our_origin(server: Server) -> None:
    rid = server.pending()
    bob = sign_in(server, "bob")
    url = f"/v1/requests/{rid}/decisions"
    assert bob.post(url, json=[{"type": "approve"}]).status_code == 403
    evil = bob.post(
        url,
        json=[{"type": "approve"}],
        headers={"X-CSRF-Token": csrf_of(bob), "Origin": "https://evil.example"},
    )
    assert evil.status_code == 403 and evil.json()["error"] == "forbidden_origin"
    ok = bob.post(url, json=[{"type": "approve"}], headers={"X-CSRF-Token": csrf_of(bob)})
    assert ok.status_code == 200


def test_a_forged_origin_on_the_decision_form_is_refused(server: Server) -> None:
    rid = server.pending()
    bob = sign_in(server, "bob")
    r = bob.post(
        f"/requests/{rid}/decide",
        data={"tool_call_id": "call_1", "type": "approve", "csrf": csrf_of(bob)},
        headers={"Origin": "https://evil.example"},
    )
    assert r.status_code == 403
    assert server.client("alice").get(f"/v1/requests/{rid}").json()["status"] == "pending"


def test_edit_with_invalid_args_shows_the_error_inline_and_stores_nothing(server: Server) -> None:
    rid = server.pending()
    bob = sign_in(server, "bob")
    data = {
        "tool_call_id": "call_1",
        "type": "edit",
        "arg.amount": "5000000",  # the policy denies it (hard limit)
        "arg.memo": "",
        "csrf": csrf_of(bob),
    }
    r = form_post(bob, server, f"/requests/{rid}/decide", data)
    assert r.status_code == 422
    assert "hard limit" in r.text and 'value="5000000"' in r.text
    not_a_number = form_post(bob, server, f"/requests/{rid}/decide", {**data, "arg.amount": "lots"})
    assert not_a_number.status_code == 422 and "must be a whole number" in not_a_number.text
    req = server.client("alice").get(f"/v1/requests/{rid}").json()
    assert req["status"] == "pending" and req["decisions"] == []


def test_edit_by_form_runs_with_the_edited_amount(server: Server) -> None:
    rid = server.pending()
    bob = sign_in(server, "bob")
    data = {"tool_call_id": "call_1", "type": "edit", "arg.amount": "20000", "csrf": csrf_of(bob)}
    assert form_post(bob, server, f"/requests/{rid}/decide", data).status_code == 303
    call = server.client("alice").get(f"/v1/requests/{rid}").json()["calls"][0]
    assert call["resolution"] == "edited" and call["action"]["args"]["amount"] == 20000


def test_request_page_shows_context_redacts_secrets_and_only_allowed_buttons(
    server: Server,
) -> None:
    r = server.submit(
        [
            {
                "id": "call_1",
                "name": "deploy",
                "args": {"service": "api", "api_key": "sk-live-123", "nested": {"password": "p"}},
            }
        ],
        user_request="ship the fix",
        reasoning="tests are green",
    )
    rid = r.json()["id"]
    dave = sign_in(server, "dave")
    page = dave.get(f"/requests/{rid}").text
    assert "ship the fix" in page and "tests are green" in page and "deploy.default" in page
    assert "sk-live-123" not in page and '"p"' not in page and "••••••" in page
    assert "btn-approve" in page and "btn-reject" in page and "btn-respond" in page
    assert "btn-edit" not in page  # edit is not an allowed decision for deploy
    frank = sign_in(server, "frank")  # the requester, without the ops role
    assert frank.get(f"/requests/{rid}").status_code == 200
    assert "btn-approve" not in frank.get(f"/requests/{rid}").text


def test_a_second_decision_by_form_shows_who_decided(server: Server) -> None:
    rid = server.pending()
    bob, carol = sign_in(server, "bob"), sign_in(server, "carol")
    carol_csrf = csrf_of(carol)
    form_post(
        bob,
        server,
        f"/requests/{rid}/decide",
        {"tool_call_id": "call_1", "type": "approve", "csrf": csrf_of(bob)},
    )
    late = form_post(
        carol,
        server,
        f"/requests/{rid}/decide",
        {"tool_call_id": "call_1", "type": "reject", "message": "no", "csrf": carol_csrf},
    )
    assert late.status_code == 409 and "bob" in late.text


def test_sign_out_ends_the_session(server: Server) -> None:
    bob = sign_in(server, "bob")
    r = form_post(bob, server, "/logout", {"csrf": csrf_of(bob)})
    assert r.status_code == 303
    assert bob.get("/inbox").status_code == 303


def test_revoking_the_token_ends_its_sessions(server: Server) -> None:
    from signoff.server import revoke_token

    bob = sign_in(server, "bob")
    assert bob.get("/inbox").status_code == 200
    server.run(revoke_token(server.app.state.signoff.db, server.tokens["bob"]))
    assert bob.get("/inbox").status_code == 303


def test_history_and_audit_pages_filter(server: Server) -> None:
    rid = server.pending()
    other = server.pending(call_id="call_2", thread="t-2")
    server.client("bob").post(f"/v1/requests/{rid}/decisions", json=[{"type": "approve"}])
    server.client("bot").post(f"/v1/requests/{other}/cancel")
    alice = sign_in(server, "alice")
    history = alice.get("/history", params={"status": "resolved"}).text
    assert rid in history and other not in history
    assert other in alice.get("/history", params={"thread": "t-2"}).text
    audit = alice.get("/audit", params={"request_id": rid}).text
    assert "decided" in audit and "bob" in audit and other not in audit
    assert alice.get("/history", params={"status": "nope"}).status_code == 422
