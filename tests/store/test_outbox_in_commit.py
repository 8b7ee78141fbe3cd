"""The messages a change announces are stored by the change's own commit (every backend).

An escalation's prompts for the next group, a chain's new stage's, events subscribers follow:
before, they were queued after the commit (``after_change``), so a crash between the two left
a request escalated whose next group was never asked. Now ``Gate.update`` plans them inside
the store's transaction (``Transition.outbox``) and the store writes them with the change —
so they are there before any after-commit step runs, and only when the change was written."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from signoff import ApprovalRequest, Gate, Policy
from signoff.model.resolution import Transition, due_transition
from signoff.store import Store
from tests.channels.conftest import SLACK_SECRET, policy_text, submit
from tests.channels.receiver import Receiver

pytestmark = pytest.mark.asyncio

CHANNELS = """
channels:
  slack:
    bot_token: "${T_SLACK_TOKEN}"
    signing_secret: "${T_SLACK_SECRET}"
    api_url: "{url}/slack/api"
  delivery: {backoff: 0.05, backoff_cap: 0.2, poll: 0.2}
"""
ESCALATING = """
  risky:
    default: require_approval
    approvers: {roles: [finance]}
    timeout: 1h
    on_timeout: escalate
    escalate_to: {roles: [ops]}
    escalate_after: 30m
"""


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """A Slack stand-in on loopback, and the channel's secrets in the environment."""
    monkeypatch.setenv("T_SLACK_TOKEN", "xoxb-test-token")
    monkeypatch.setenv("T_SLACK_SECRET", SLACK_SECRET)
    receiver = Receiver()
    yield receiver
    receiver.close()


def escalating_policy(receiver: Receiver) -> Policy:
    section = CHANNELS.replace("{url}", receiver.url)
    text = policy_text(receiver.url, "", channels=section)
    return Policy.from_yaml(text.replace("\ntools:\n", "\ntools:" + ESCALATING, 1))


async def test_an_escalations_prompts_are_stored_by_the_commit_that_escalates(
    store: Store, slack: Receiver
) -> None:
    gate = Gate(escalating_policy(slack), store, sweep_interval=3600)
    try:
        req = await submit(gate, "risky", args={})
        assert gate.delivery is not None
        before = {r.id for r in await gate.delivery.outbox.outbox_for(req.id)}
        later = req.created_at + timedelta(minutes=31)

        def escalate(r: ApprovalRequest) -> Transition:
            tr = due_transition(r, later)
            assert tr is not None
            return tr

        # the change alone — no after_change, as if the process died right after its commit
        tr = await gate.update(req.id, escalate)
        stored = await gate.delivery.outbox.outbox_for(req.id)
    finally:
        await gate.aclose()
    assert tr.request.escalated
    new = [r for r in stored if r.id not in before]
    escalations = [r for r in new if r.kind == "escalation"]
    assert [r.recipient for r in escalations] == ["UDAVE"]  # ops: the next group
    assert {r.id for r in tr.outbox} == {r.id for r in new}
