"""A policy on a real SQLite file, an agent's gate writing to it, and helpers to drive the
Textual app with its Pilot — waiting on conditions, never on time."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.css.query import NoMatches
from textual.pilot import Pilot

from signoff import CallContext, Gate, Policy, Principal, ToolCall
from signoff.cli.deciding import CliGate
from signoff.model import ApprovalRequest

POLICY = """
version: 1
store: sqlite:///signoff.db
people:
  mia:   {roles: [manager]}
  bob:   {roles: [finance]}
  carol: {roles: [finance]}
  dave:  {roles: [ops]}
  erin:  {roles: [finance]}
grants: {default_ttl: 1h}
tools:
  transfer_funds:
    description: "Transfer {args.amount} to {args.to}"
    default: require_approval
    approvers: {roles: [finance]}
    allowed_decisions: [approve, edit, reject]
    editable_args: [amount]
    risk: high
  pay_many:
    default: require_approval
    approvers: {roles: [finance], quorum: 2}
  pay_vendor:
    default: require_approval
    approvers:
      stages:
        - {roles: [manager]}
        - {roles: [finance]}
  deploy:
    default: require_approval
    approvers: {roles: [ops]}
    allowed_decisions: [approve, reject, respond]
"""

#: Enough rounds for any loopback wake-up; a condition that never holds fails the test.
ROUNDS = 500


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "signoff.yaml"
    path.write_text(textwrap.dedent(POLICY))
    monkeypatch.chdir(tmp_path)
    return path


@pytest.fixture
def agent(config: Path) -> Iterator[Gate]:
    """The agent's side: another gate (another connection) on the same SQLite file."""
    with Gate.from_config(config) as gate:
        yield gate


@pytest.fixture
def local_gate(config: Path) -> Iterator[CliGate]:
    """The approver's side, as ``signoff watch`` opens it."""
    with CliGate(Policy.load(config), os_user="tester") as gate:
        yield gate


def ask(
    gate: Gate,
    tool: str = "transfer_funds",
    args: dict[str, Any] | None = None,
    principal: str = "erin",
    **context: Any,
) -> ApprovalRequest:
    """Store a request as the agent would (without blocking on it)."""
    ctx = CallContext(principal=Principal(principal), agent="billing-bot", thread="t-1", **context)
    call = ToolCall(tool, args if args is not None else {"amount": 50_000, "to": "ACME"})
    request = gate.submit([call], ctx).request
    assert request is not None
    return request


async def until(pilot: Pilot[Any], condition: Callable[[], object], what: str) -> None:
    """Let the app run until ``condition`` holds."""
    for _ in range(ROUNDS):
        try:
            if condition():
                return
        except NoMatches:  # the widget it reads is not mounted yet
            pass
        await pilot.pause(0.01)
    notes = getattr(pilot.app, "notes", None)
    raise AssertionError(f"never happened: {what} (notes: {notes})")
