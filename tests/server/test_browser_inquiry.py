"""An inquiry form in a real browser (Debian's Chromium): a hostile agent's markdown renders
without running, loading or hiding anything; checkboxes, radio buttons, a select and a text
box post one answer object keyed by question id; a refused answer shows next to its question
and the inquiry stays pending."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.server.conftest import Server
from tests.server.test_browser import ARGS, CHROMIUM, signed_in

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium"),
]

HOSTILE_TITLE = (
    "**Deploy** plan — see [the runbook](https://example.com/runbook) "
    "or [click me](javascript:alert(1)) <img src=x onerror=alert(2)> "
    "![pixel](https://example.com/p.png) cat \u202etxt.exe"
)
FORM: list[dict[str, Any]] = [
    {"id": "region", "question": "Which *region*?", "choices": ["<b>eu</b>", "us"]},
    {
        "id": "features",
        "question": "Which `features`?",
        "choices": ["logs", "metrics", "traces"],
        "multiple": True,
        "default_answer": ["logs"],
    },
    {
        "id": "zone",
        "question": "Which zone?",
        "choices": [f"z{i}" for i in range(8)],  # long: a select
    },
    {"id": "note", "question": "Anything else?"},
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def ask(server: Server) -> str:
    r = server.client("bot").post(
        "/v1/inquiries",
        json={
            "question": HOSTILE_TITLE,
            "questions": FORM,
            "format": "markdown",
            "context": {"principal": {"id": "frank"}, "thread": "t-form"},
        },
    )
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def open_form(browser: Any, server: Server, rid: str, dialogs: list[str]) -> Any:
    page = signed_in(browser, server, "dave")
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{server.url}/requests/{rid}")
    page.locator("form.respond").wait_for()
    return page


def test_hostile_markdown_renders_inert_and_the_form_posts_answers_by_id(
    browser: Any, server: Server
) -> None:
    rid = ask(server)
    dialogs: list[str] = []
    page = open_form(browser, server, rid, dialogs)
    title = page.locator("blockquote.question")
    assert title.locator("strong").inner_text() == "Deploy"
    links = title.locator("a")  # the runbook, and the image as a plain link (never loaded)
    hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
    assert hrefs == ["https://example.com/runbook", "https://example.com/p.png"]
    assert "noopener" in (links.first.get_attribute("rel") or "")
    assert page.locator("a[href^='javascript']").count() == 0
    assert page.locator(".request img").count() == 0
    text = title.inner_text()
    assert "<img src=x onerror=alert(2)>" in text and "[click me](javascript:alert(1))" in text
    assert "<U+202E>txt.exe" in text and "\u202e" not in text
    region = page.locator('fieldset[data-question="region"]')
    assert region.locator("legend em").inner_text() == "region"
    assert region.get_by_text("<b>eu</b>").count() == 1  # a choice is text, not markup
    features = page.locator('fieldset[data-question="features"]')
    assert features.locator('input[value="logs"]').is_checked()
    features.locator('input[value="traces"]').check()
    region.locator('input[value="<b>eu</b>"]').check()
    page.locator('select[name="answer.zone"]').select_option("z7")
    page.locator('textarea[name="answer.note"]').fill("ship on Monday")
    page.locator("form.respond button").click()
    page.locator(".outcome").get_by_text("responded").wait_for()
    answered = server.client("dave").get(f"/v1/requests/{rid}").json()
    assert answered["calls"][0]["answers"] == {
        "region": "<b>eu</b>",
        "features": ["logs", "traces"],
        "zone": "z7",
        "note": "ship on Monday",
    }
    assert page.locator("dl.answers").get_by_text("logs, traces").count() == 1
    assert dialogs == []


def test_a_refused_answer_shows_at_its_question_and_stays_pending(
    browser: Any, server: Server
) -> None:
    rid = ask(server)
    dialogs: list[str] = []
    page = open_form(browser, server, rid, dialogs)
    page.locator('fieldset[data-question="region"] input[value="us"]').check()
    page.locator('textarea[name="answer.note"]').fill("n/a")
    page.locator("form.respond button").click()  # no zone picked: the select allows it
    error = page.locator('fieldset[data-question="zone"] .field-error')
    error.wait_for()
    assert "no answer" in error.inner_text()
    assert server.client("dave").get(f"/v1/requests/{rid}").json()["status"] == "pending"
    assert dialogs == []
