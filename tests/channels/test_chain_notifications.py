"""An approval chain asks each stage only when it starts (issue 16, part 3).

The outbox rows are planned in the store's transactions (SQLite and PostgreSQL); the Slack
channel has no token in this process, so the rows stay queued and the test reads their
recipients. An in-process channel (the kind the console channel is) hears of each stage.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from signoff import Gate
from signoff.channels import Outgoing, Target
from signoff.channels.console import ConsoleChannel
from signoff.channels.host import GateHandle
from signoff.channels.redact import Redactor
from signoff.channels.webhooks import payload
from signoff.model import ApprovalRequest
from tests.gate.test_chains import ask, make_policy, make_store, store_kind  # noqa: F401
from tests.store.conftest import pg_url  # noqa: F401  (the run's throwaway PostgreSQL)

SLACK = """
channels:
  slack: {bot_token: "${CHAINS_TEST_NO_SLACK_TOKEN}", signing_secret: "${CHAINS_TEST_NO_SECRET}"}
  webhooks: [{url: "http://127.0.0.1:9/hook", secret: "${CHAINS_TEST_NO_SECRET}"}]
"""


class Recording:
    """An in-process channel that remembers which stage each notification was about."""

    name = "recording"

    def __init__(self) -> None:
        self.stages: list[str] = []

    async def notify(self, request: ApprovalRequest, gate: GateHandle) -> None:
        from signoff.model import chains

        self.stages.append(chains.progress(request.review_configs[0], request.calls[0]))

    async def resolved(self, request: ApprovalRequest, gate: GateHandle) -> None:
        self.stages.append(f"resolved: {request.calls[0].resolution}")


@pytest.fixture
def recording() -> Recording:
    return Recording()


@pytest.fixture
def console() -> io.StringIO:
    return io.StringIO()


@pytest.fixture
def gate(
    store_kind: str,  # noqa: F811
    tmp_path: Path,
    request: pytest.FixtureRequest,
    recording: Recording,
    console: io.StringIO,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Gate]:
    monkeypatch.delenv("CHAINS_TEST_NO_SLACK_TOKEN", raising=False)
    monkeypatch.delenv("CHAINS_TEST_NO_SECRET", raising=False)
    store = make_store(store_kind, tmp_path, request)
    g = Gate(make_policy(extra=SLACK), store, channels=[recording, ConsoleChannel(stream=console)])
    yield g
    g.close()


def prompted(gate: Gate, req: ApprovalRequest) -> list[tuple[str, str]]:
    assert gate.delivery is not None
    rows: list[Any] = gate.run_sync(gate.delivery.outbox.outbox_for(req.id))
    return sorted((r.kind, r.recipient) for r in rows if r.kind in ("prompt", "escalation"))


def test_stage_two_is_asked_only_when_stage_one_is_complete(
    gate: Gate, recording: Recording
) -> None:
    req = ask(gate, "pay_invoice")
    # stage 1: the managers (max is one); never finance yet
    assert prompted(gate, req) == [("prompt", "UMAX"), ("prompt", "UMIA")]
    assert recording.stages == ["stage 1 of 2: 0 of 1 manager approval"]
    gate.decide(req.id, [{"type": "approve"}], approver="mia")
    assert prompted(gate, req) == [
        ("prompt", "UFAY"),
        ("prompt", "UFRED"),
        ("prompt", "UMAX"),  # a manager and in finance: asked for each stage
        ("prompt", "UMAX"),
        ("prompt", "UMIA"),
    ]
    assert recording.stages[-1] == "stage 2 of 2: 0 of 2 finance approvals"
    gate.decide(req.id, [{"type": "approve"}], approver="fay")
    assert len(prompted(gate, req)) == 5  # a vote inside a stage asks nobody new
    gate.decide(req.id, [{"type": "approve"}], approver="fred")
    assert recording.stages[-1] == "resolved: approved"


def test_whoever_counted_at_stage_one_is_not_asked_for_stage_two(gate: Gate) -> None:
    req = ask(gate, "pay_invoice")
    gate.decide(req.id, [{"type": "approve"}], approver="max")
    assert prompted(gate, req) == [
        ("prompt", "UFAY"),
        ("prompt", "UFRED"),
        ("prompt", "UMAX"),  # stage 1 only: distinct: true, max cannot count again
        ("prompt", "UMIA"),
    ]


def test_all_of_asks_every_group_at_once(gate: Gate) -> None:
    req = ask(gate, "grant_access")
    assert prompted(gate, req) == [
        ("prompt", "UFAY"),
        ("prompt", "UFRED"),
        ("prompt", "UMAX"),
        ("prompt", "USAM"),
    ]


def test_a_stage_escalation_asks_only_its_escalation_group(gate: Gate) -> None:
    from tests.gate.test_chains import sweep_at_due

    req = ask(gate, "wire_out")
    sweep_at_due(gate, req)
    assert ("escalation", "UOZZY") in prompted(gate, req)
    assert not any(who in ("UFAY", "UFRED") for _, who in prompted(gate, req))


def test_the_console_message_says_which_stage_is_asked(gate: Gate, console: io.StringIO) -> None:
    req = ask(gate, "pay_invoice")
    assert "requested by erin — stage 1 of 2: 0 of 1 manager approval" in console.getvalue()
    gate.decide(req.id, [{"type": "approve"}], approver="mia")
    assert "stage 2 of 2: 0 of 2 finance approvals" in console.getvalue()


def test_webhook_subscribers_hear_when_a_stage_starts(gate: Gate) -> None:
    req = ask(gate, "pay_invoice")
    gate.decide(req.id, [{"type": "approve"}], approver="mia")
    assert gate.delivery is not None
    rows = gate.run_sync(gate.delivery.outbox.outbox_for(req.id))
    events = [r.data["event"] for r in rows if r.kind == "event"]
    assert events == ["created", "stage_started"]
    now = gate.run_sync(gate.get(req.id))
    out = Outgoing(
        "event", now, Target("http://127.0.0.1:9/hook"), "k", Redactor.from_policy(gate.policy)
    )
    (call,) = payload(now, "stage_started", out)["data"]["calls"]
    assert call["stage"] == 1 and call["progress"] == "stage 2 of 2: 0 of 2 finance approvals"
