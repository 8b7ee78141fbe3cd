"""In a real browser: a right-to-left override cannot reverse what the approver reads, and
after an edit the page shows the arguments that will run."""

from __future__ import annotations

import json
from typing import Any

from tests.server.conftest import Server
from tests.server.test_browser import browser, pytestmark, signed_in

__all__ = ["browser", "pytestmark"]  # the module-scoped browser fixture and the slow/skip marks


def test_a_right_to_left_override_shows_as_a_visible_code_in_the_browser(
    browser: Any, server: Server
) -> None:
    r = server.submit(
        [
            {
                "id": "call_1",
                "name": "transfer_funds",
                "args": {"amount": 50_000, "to": "ACME\u202etxt.exe"},
            }
        ],
        thread="t\u202e1",
    )
    rid = r.json()["id"]
    page = signed_in(browser, server, "bob")
    page.goto(f"{server.url}/requests/{rid}")
    shown = page.locator("pre.args").first.inner_text()
    assert '"to": "ACME<U+202E>txt.exe"' in shown and "\u202e" not in shown
    assert page.locator("dl.facts").inner_text().count("t<U+202E>1") == 1


def test_the_page_shows_the_edited_arguments_after_an_edit_in_the_browser(
    browser: Any, server: Server
) -> None:
    rid = server.pending(amount=50_000)
    page = signed_in(browser, server, "bob")
    page.goto(f"{server.url}/requests/{rid}")
    page.locator("form.edit input[name='arg.amount']").fill("20000")
    page.get_by_role("button", name="Approve with changes").click()
    page.locator(".edited-note").wait_for()
    assert json.loads(page.locator("pre.args").first.inner_text())["amount"] == 20000
    diff = page.locator("table.arg-diff").inner_text()
    assert "amount" in diff and "50000" in diff and "20000" in diff
