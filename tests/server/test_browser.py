"""The web inbox in a real browser: Python Playwright driving Debian's Chromium.

No timing assertions: every wait is for a visible change, with a generous timeout.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from signoff.client import RemoteGate
from signoff.model import ApprovalRequest
from signoff.server.links import link_url, store_link
from tests.server.conftest import Server

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 20_000

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium"),
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def signed_in(browser: Any, server: Server, who: str, **context: Any) -> Any:
    page = browser.new_context(**context).new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(server.run(server.links.login_link(who)))
    page.get_by_role("button", name=f"Continue as {who}").click()
    page.wait_for_url("**/inbox")
    return page


def created_event(server: Server) -> tuple[threading.Event, list[str]]:
    seen = threading.Event()
    ids: list[str] = []

    def listener(req: ApprovalRequest, event: str) -> None:
        if event == "created":
            ids.append(req.id)
            seen.set()

    server.gate.store.add_listener(listener)
    return seen, ids


def test_approve_in_the_browser_resumes_a_waiting_remote_agent(
    browser: Any, server: Server
) -> None:
    seen, ids = created_event(server)
    remote = RemoteGate(server.url, server.tokens["bot"])
    ran: list[dict[str, Any]] = []

    @remote.guard
    def transfer_funds(amount: int, to: str) -> str:
        ran.append({"amount": amount, "to": to})
        return f"sent {amount} to {to}"

    results: list[str] = []

    def agent() -> None:
        with remote.context(principal="frank", thread="t-browser", user_request="pay ACME"):
            results.append(transfer_funds(amount=50_000, to="ACME"))

    thread = threading.Thread(target=agent)
    thread.start()
    try:
        assert seen.wait(WAIT_MS / 1000)
        page = signed_in(browser, server, "bob")
        page.locator(f'[data-id="{ids[0]}"] a').click()
        page.get_by_text("pay ACME").wait_for()
        page.locator("form.approve button").click()
        page.locator(".outcome").get_by_text("approved").wait_for()
        thread.join(WAIT_MS / 1000)
        assert results == ["sent 50000 to ACME"] and len(ran) == 1
    finally:
        thread.join(WAIT_MS / 1000)
        remote.close()


def test_new_requests_appear_in_the_open_inbox_without_a_reload(
    browser: Any, server: Server
) -> None:
    page = signed_in(browser, server, "bob")
    page.locator("#live[data-state=open]").wait_for()
    rid = server.pending()
    page.locator(f'[data-id="{rid}"]').wait_for()


def test_two_browsers_one_request_one_outcome(browser: Any, server: Server) -> None:
    rid = server.pending()
    bob = signed_in(browser, server, "bob")
    carol = signed_in(browser, server, "carol")
    stale = signed_in(browser, server, "alice", java_script_enabled=False)  # never updates
    for page in (bob, carol, stale):
        page.goto(f"{server.url}/requests/{rid}")
    carol.locator("#live[data-state=open]").wait_for()
    carol.locator(".status-pending").wait_for()
    bob.locator("form.approve button").click()
    bob.locator(".outcome").get_by_text("approved").wait_for()
    # Carol's page follows without a reload and offers no buttons any more.
    carol.locator(".outcome").get_by_text("bob").wait_for()
    assert carol.locator("form.decide").count() == 0
    # A page that did not update still cannot decide: the server answers who decided.
    stale.locator("form.reject textarea").fill("too late")
    stale.locator("form.reject button").click()
    stale.get_by_text("already").first.wait_for()
    assert "bob" in stale.content()
    req = server.client("alice").get(f"/v1/requests/{rid}").json()
    assert req["status"] == "resolved" and [d["approver"] for d in req["decisions"]] == ["bob"]


def test_edit_with_invalid_args_shows_the_error_and_stores_nothing(
    browser: Any, server: Server
) -> None:
    rid = server.pending()
    page = signed_in(browser, server, "bob")
    page.goto(f"{server.url}/requests/{rid}")
    page.locator('form.edit input[name="arg.amount"]').fill("5000000")
    page.locator("form.edit button").click()
    error = page.locator("form.edit [role=alert]").filter(has_text="hard limit")
    error.wait_for()
    assert page.locator('form.edit input[name="arg.amount"]').input_value() == "5000000"
    req = server.client("alice").get(f"/v1/requests/{rid}").json()
    assert req["status"] == "pending" and req["decisions"] == []


def test_a_link_opened_by_get_and_head_decides_nothing(browser: Any, server: Server) -> None:
    rid = server.pending()
    url = server.run(server.links.decision_link(rid, "bob", "approve"))
    context = browser.new_context()
    assert context.request.head(url).status == 200
    page = context.new_page()
    page.goto(url)
    page.get_by_text("You are deciding as").wait_for()
    page.reload()
    assert server.client("alice").get(f"/v1/requests/{rid}").json()["status"] == "pending"
    page.get_by_role("button", name="Approve").click()
    page.get_by_text("Approved as bob").wait_for()
    assert server.client("alice").get(f"/v1/requests/{rid}").json()["status"] == "resolved"


def test_expired_and_reused_links_are_refused(browser: Any, server: Server) -> None:
    rid = server.pending()
    db = server.app.state.signoff.db
    expired = link_url(
        server.url, "review", server.run(store_link(db, "review", "bob", time.time() - 1, rid)), rid
    )
    page = browser.new_context().new_page()
    page.set_default_timeout(WAIT_MS)
    response = page.goto(expired)
    assert response.status == 410
    url = server.run(server.links.decision_link(rid, "carol", "reject"))
    page.goto(url)
    page.locator("form.reject textarea").fill("not this month")
    page.get_by_role("button", name="Reject").click()
    page.get_by_text("Rejected as carol").wait_for()
    again = page.goto(url)
    assert again.status == 410
    assert (
        server.client("alice").get(f"/v1/requests/{rid}").json()["decisions"][0]["approver"]
        == "carol"
    )


def test_a_forged_origin_is_refused(browser: Any, server: Server) -> None:
    rid = server.pending()
    url = server.run(server.links.decision_link(rid, "bob"))
    context = browser.new_context()
    token = url.split("t=", 1)[1]
    response = context.request.post(
        f"{server.url}/a/{rid}",
        form={"t": token, "decision": "approve"},
        headers={"Origin": "https://evil.example"},
    )
    assert response.status == 403
    page = signed_in(browser, server, "bob")
    csrf = page.locator("body").get_attribute("data-csrf")
    forged = page.request.post(
        f"{server.url}/requests/{rid}/decide",
        form={"tool_call_id": "call_1", "type": "approve", "csrf": csrf},
        headers={"Origin": "https://evil.example"},
    )
    assert forged.status == 403
    assert server.client("alice").get(f"/v1/requests/{rid}").json()["status"] == "pending"
