"""Every surface names a judge's answer as a model's (``judge:NAME (a model, not a human)``)
and keeps the model's text inert: the chat channels' outcome line, ``signoff show``, the
web inbox's presenter."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from rich.console import Console

from signoff.channels.message import outcome
from signoff.cli.render import request_detail
from signoff.model import ApprovalRequest
from tests.gate import inquiry_judges
from tests.gate.test_inquiry_fallback import ask, make_gate, wait

HOSTILE = "eu\x1b[2J\u202e<script>x</script>"
LABEL = "judge:rules (a model, not a human)"


@pytest.fixture(scope="module")
def answered() -> Iterator[ApprovalRequest]:
    inquiry_judges.reset()
    inquiry_judges.answers["Region?"] = HOSTILE
    with make_gate() as gate:
        req = wait(gate, ask(gate, "Region?", choices=None, allow_other=True))
    assert req.calls[0].resolved_by == "judge:rules"
    yield req
    inquiry_judges.reset()


def test_chat_channels_say_a_model_answered(answered: ApprovalRequest) -> None:
    text = outcome(answered)
    assert f"Answered by {LABEL}" in text


def test_cli_show_says_a_model_answered_and_keeps_the_answer_inert(
    answered: ApprovalRequest,
) -> None:
    buffer = io.StringIO()
    request_detail(Console(file=buffer, width=200, color_system=None), answered)
    shown = buffer.getvalue()
    assert LABEL in shown
    assert "\x1b" not in shown and "\u202e" not in shown


def test_web_inbox_says_a_model_answered(answered: ApprovalRequest) -> None:
    pytest.importorskip("starlette")
    from signoff.server.presenter import outcome_text

    assert outcome_text(answered.calls[0]) == f"responded by {LABEL}"
