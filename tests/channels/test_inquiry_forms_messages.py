"""Inquiry forms in chat messages: every question listed, inertly and in each platform's
escaping; no one-click answer buttons (a form is answered on the web page or with
``signoff respond --answers``); a single question's buttons answer within its choices."""

from __future__ import annotations

from signoff.channels import Outgoing, Target, discord, message, slack
from signoff.channels.redact import Redactor
from signoff.model import ApprovalRequest, make_inquiry
from tests.store.factories import make_request

PAGE = "https://signoff.example/requests/req_1"


def form_request() -> ApprovalRequest:
    req = make_request(kind="inquiry")
    req.inquiry = make_inquiry(
        "Plan <!channel> \u202etxt",
        questions=[
            {
                "id": "region",
                "question": "Which [region](https://evil.example)?",
                "choices": ["<@U1>", "us"],
            },
            {"id": "why", "question": "Why\x1b[2J?"},
        ],
        format="markdown",
    )
    return req


def outgoing(req: ApprovalRequest) -> Outgoing:
    return Outgoing("prompt", req, Target("U1", "alice"), "row-1", Redactor(), PAGE)  # type: ignore[arg-type]


def test_a_form_lists_every_question_inertly() -> None:
    text = message.question(form_request())
    assert text == (
        "Plan <!channel> <U+202E>txt — 2 questions: "
        "region: Which [region](https://evil.example)?; why: Why␛[2J?"
    )


def test_a_form_offers_no_answer_buttons_and_hints_at_answers_json() -> None:
    req = form_request()
    assert message.choices(req).answers == ()
    assert "--answers" in message.cli_hint(req)


def test_slack_and_discord_escape_the_form() -> None:
    req = form_request()
    blocks = slack.prompt_blocks(outgoing(req))
    shown = " ".join(str(b) for b in blocks)
    assert "<!channel>" not in shown and "&lt;!channel&gt;" in shown
    assert "\u202e" not in shown and "\x1b" not in shown
    description = discord.embed(outgoing(req))["description"]
    assert "\\[region\\]\\(https://evil.example\\)" in description
