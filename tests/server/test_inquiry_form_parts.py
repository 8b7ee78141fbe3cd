"""The inbox's inquiry pieces without a browser: the markdown renderer against hostile
input, and a posted form read back as answers keyed by question id."""

from __future__ import annotations

import pytest
from starlette.datastructures import FormData

from signoff.model import make_inquiry
from signoff.server.inquiry_form import answers_from_form, question_views
from signoff.server.markdown import render_markdown


@pytest.mark.parametrize(
    ("text", "absent"),
    [
        ("<script>alert(1)</script>", "<script"),
        ("<img src=x onerror=alert(1)>", "<img"),
        ("![p](https://example.com/p.png)", "<img"),
        ("[x](javascript:alert(1))", "href"),
        ("[x](JAVASCRIPT:alert(1))", "href"),
        ("[x](data:text/html;base64,PHNjcmlwdD4=)", "href"),
        ("[x](vbscript:msgbox)", "href"),
        ("[x](/requests/req_1)", "href"),
        ("| a | b |\n|:-|-:|\n| 1 | 2 |", "style="),
        ("a\u202eb\x1b[2J\u200b", "\u202e"),
    ],
)
def test_markdown_renders_nothing_that_runs_loads_or_hides(text: str, absent: str) -> None:
    html = render_markdown(text)
    assert absent not in html
    assert "\x1b" not in html and "\u200b" not in html


def test_markdown_keeps_emphasis_code_and_safe_links() -> None:
    html = render_markdown("**b** `c` [w](https://example.com) [m](mailto:a@example.com)")
    assert "<strong>b</strong>" in html and "<code>c</code>" in html
    assert 'href="https://example.com" rel="nofollow noopener noreferrer"' in html
    assert 'href="mailto:a@example.com"' in html


INQUIRY = make_inquiry(
    questions=[
        {"id": "region", "question": "Region?", "choices": ["eu", "us"], "allow_other": True},
        {"id": "tags", "question": "Tags?", "choices": ["a", "b"], "multiple": True},
        {"id": "zone", "question": "Zone?", "choices": [f"z{i}" for i in range(7)]},
        {"id": "note", "question": "Note?", "default_answer": "none"},
    ]
)


def test_each_question_gets_the_input_that_fits() -> None:
    kinds = {v.id: (v.kind, v.allow_other) for v in question_views(INQUIRY)}
    assert kinds == {
        "region": ("radio", True),
        "tags": ("checkboxes", False),
        "zone": ("select", False),
        "note": ("text", False),
    }
    assert question_views(INQUIRY)[3].other == "none"


def test_a_posted_form_becomes_answers_and_another_answer_wins_over_a_pick() -> None:
    form = FormData(
        [
            ("answer.region", "eu"),
            ("other.region", " ap-south "),
            ("answer.tags", "a"),
            ("answer.tags", "b"),
            ("answer.zone", ""),
            ("answer.note", "  "),
        ]
    )
    assert answers_from_form(INQUIRY, form) == {"region": "ap-south", "tags": ["a", "b"]}


def test_a_refused_answer_is_shown_at_its_question() -> None:
    views = question_views(INQUIRY, ("decisions[0].answers.zone", "question 'zone' has no answer"))
    assert [v.error for v in views] == [None, None, "question 'zone' has no answer", None]
