"""The web inbox and grants: the approve form states exactly what "also approve later calls"
would grant, and the Grants page lists active grants with a Revoke button (a CSRF-checked
form POST)."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta

from tests.server.conftest import Server
from tests.server.test_inbox_forms import csrf_of, form_post, sign_in

DEPLOY = {"id": "d1", "name": "deploy", "args": {"version": "1.2"}}


def checkbox_text(page: str) -> str | None:
    match = re.search(r'name="scope" value="thread"> ([^<]+)</label>', page)
    return html.unescape(match.group(1)) if match else None


def test_the_approve_form_states_the_exact_scope_and_expiry(server: Server) -> None:
    rid = server.submit([DEPLOY], thread="t-1").json()["id"]
    page = sign_in(server, "dave").get(f"/requests/{rid}").text
    text = checkbox_text(page)
    assert text is not None
    prefix = (
        "also approve `deploy` calls under rule deploy.default from bot for frank on thread t-1"
        " until "
    )
    assert text.startswith(prefix)
    until = datetime.strptime(text[len(prefix) :], "%Y-%m-%d %H:%M UTC").replace(tzinfo=UTC)
    expected = datetime.now(UTC) + timedelta(hours=8)  # grants.default_ttl
    assert abs((until - expected).total_seconds()) < 120
    assert "later calls like this" not in page


def test_no_checkbox_where_a_grant_cannot_stand_in(server: Server) -> None:
    rid = server.submit([{"id": "p1", "name": "pay_many", "args": {}}]).json()["id"]
    page = sign_in(server, "bob").get(f"/requests/{rid}").text
    assert "btn-approve" in page and checkbox_text(page) is None  # quorum 2


def test_ticking_the_box_creates_the_grant_it_stated(server: Server) -> None:
    rid = server.submit([DEPLOY], thread="t-1").json()["id"]
    browser = sign_in(server, "dave")
    stated = checkbox_text(browser.get(f"/requests/{rid}").text)
    r = form_post(
        browser,
        server,
        f"/requests/{rid}/decide",
        {"csrf": csrf_of(browser), "tool_call_id": "d1", "type": "approve", "scope": "thread"},
    )
    assert r.status_code == 303, r.text
    [grant] = server.client("dave").get("/v1/grants").json()["grants"]
    assert grant["description"][:-5] == (stated or "")[:-5]  # the minute may have turned
    assert grant["source_request"] == rid and grant["scope"] == "thread"
    page = browser.get(f"/requests/{rid}").text
    assert grant["id"] in page


def test_the_grants_page_lists_active_grants_with_revoke_for_who_may(server: Server) -> None:
    created = server.client("dave").post(
        "/v1/grants",
        json={
            "tool": "deploy",
            "effect": "allow",
            "scope": "agent",
            "agent": "bot",
            "reason": "R1",
        },
    )
    grant = created.json()
    mine = sign_in(server, "dave").get("/grants")
    assert mine.status_code == 200
    assert html.unescape(mine.text).count(grant["description"]) == 1
    assert f'action="/grants/{grant["id"]}/revoke"' in mine.text
    admin = sign_in(server, "alice").get("/grants").text
    assert f'action="/grants/{grant["id"]}/revoke"' in admin
    other = sign_in(server, "bob").get("/grants").text
    assert grant["id"] in other and f'action="/grants/{grant["id"]}/revoke"' not in other


def test_revoke_from_the_grants_page(server: Server) -> None:
    gid = (
        server.client("dave")
        .post(
            "/v1/grants",
            json={"tool": "deploy", "effect": "allow", "scope": "agent", "agent": "bot"},
        )
        .json()["id"]
    )
    browser = sign_in(server, "dave")
    forged = form_post(browser, server, f"/grants/{gid}/revoke", {"reason": "x"})
    assert forged.status_code == 403
    assert server.client("dave").get("/v1/grants?active=true").json()["grants"]
    r = form_post(
        browser,
        server,
        f"/grants/{gid}/revoke",
        {"csrf": csrf_of(browser, "/grants"), "reason": "done"},
    )
    assert r.status_code == 303 and r.headers["location"] == "/grants"
    assert server.client("dave").get("/v1/grants?active=true").json()["grants"] == []
    [revoked] = server.client("dave").get("/v1/grants").json()["grants"]
    assert revoked["revoked_by"] == "dave" and revoked["revoke_reason"] == "done"
    assert "No grant is in force" in browser.get("/grants").text


def test_someone_else_cannot_revoke_from_the_page(server: Server) -> None:
    gid = (
        server.client("dave")
        .post(
            "/v1/grants",
            json={"tool": "deploy", "effect": "allow", "scope": "agent", "agent": "bot"},
        )
        .json()["id"]
    )
    browser = sign_in(server, "bob")
    r = form_post(browser, server, f"/grants/{gid}/revoke", {"csrf": csrf_of(browser, "/grants")})
    assert r.status_code == 403 and "may not revoke" in html.unescape(r.text)
    assert server.client("dave").get("/v1/grants?active=true").json()["grants"]


def test_the_grants_page_needs_a_signed_in_person(server: Server) -> None:
    r = server.client().get("/grants")
    assert r.status_code == 303 and r.headers["location"] == "/login"
