"""What a row shows: the intent judge's verdict labelled as model output, inert text."""

from __future__ import annotations

from datetime import timedelta

from signoff import Gate
from signoff.model import utcnow
from signoff.tui import rows
from tests.tui.conftest import ask


def test_intent_verdict_is_labelled_as_the_judges(agent: Gate) -> None:
    req = ask(agent).copy_for_update()  # a request of its own: the store's is shared
    req.action_requests[0].intent = {
        "judge": "gpt", "verdict": "[red]aligned[/]\x1b[0m", "reason": "as asked",
    }  # fmt: skip
    cells = rows.row(req, ["call"])
    assert cells["intent"].plain == "judge: [red]aligned[/]␛[0m"
    assert cells["intent"].style == "italic" and cells["you"].plain == "needs you"
    assert rows.row(req, None)["you"].plain == "?"  # a server token not yet known


def test_countdown_reads_as_hours_and_minutes_then_due(agent: Gate) -> None:
    req = ask(agent).copy_for_update()  # a request of its own: the store's is shared
    req.expires_at = utcnow() + timedelta(hours=2, minutes=30, seconds=30)
    assert rows.countdown(req) == "2h30m"
    req.expires_at = utcnow() - timedelta(seconds=1)
    assert rows.countdown(req) == "due"
