from __future__ import annotations

import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from signoff import Gate, Policy
from signoff.model import ApprovalRequest
from signoff.store import SQLiteStore
from tests.gate.snapshots import SnapshotCheckingStore

POLICY = """
version: 1
defaults:
  unknown_tool: require_approval
  approvers: {roles: [admin]}
  timeout: 1h
people:
  alice: {roles: [admin, dba]}
  bob:   {roles: [finance]}
  carol: {roles: [finance]}
  dave:  {roles: [ops]}
  erin:  {roles: []}
tools:
  get_price:
    default: allow
  delete_record:
    description: "Delete {args.table} #{args.record_id}"
    default: allow
    rules:
      - id: protect-user-1
        when: {args.table: users, args.record_id: 1}
        decision: deny
        reason: user 1 is protected
      - id: prod-delete
        when: {args.environment: production}
        decision: require_approval
        approvers: {roles: [dba]}
  transfer_funds:
    default: allow
    allowed_decisions: [approve, edit, reject]
    editable_args: [amount, memo]
    rules:
      - id: huge-transfer
        when: {args.amount: {gt: 1000000}}
        decision: deny
        reason: above the hard limit
      - id: large-transfer
        when: {args.amount: {gt: 10000}}
        decision: require_approval
        approvers: {roles: [finance], quorum: 2}
  execute:
    default: require_approval
    approvers: {roles: [ops]}
    allowed_decisions: [approve, edit, reject, respond]
    editable_args: [command]
    rules:
      - id: read-only
        when: {args.command: {first_word_in: [ls, git]}}
        decision: allow
  no_thread:
    default: require_approval
    approvers: {roles: [ops]}
    allow_thread_approval: false
  quick:
    default: require_approval
    approvers: {roles: [ops]}
    timeout: 1
  quick_allow:
    default: require_approval
    approvers: {roles: [ops]}
    timeout: 1
    on_timeout: allow
  escalating:
    default: require_approval
    approvers: {roles: [ops]}
    timeout: 2
    on_timeout: escalate
    escalate_to: {roles: [admin]}
    escalate_after: 0.5
  limited:
    default: allow
    rules:
      - id: too-many
        when: {rate: {max: 2, per: 1h, by: principal}}
        decision: require_approval
        approvers: {roles: [ops]}
"""


def make_policy(text: str = POLICY) -> Policy:
    return Policy.from_yaml(textwrap.dedent(text))


@pytest.fixture(params=["memory", "sqlite"])
def gate(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Gate]:
    # the memory variant also checks nobody changes a snapshot the store shares (copy on write)
    store = SnapshotCheckingStore() if request.param == "memory" else SQLiteStore(tmp_path / "s.db")
    g = Gate(make_policy(), store)
    yield g
    g.close()


def wait_until(predicate: Callable[[], object], timeout: float = 15.0) -> object:
    """Wait for a condition in a test (not a timing assertion: generous, fails loudly)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError("condition not reached in time")


def pending(gate: Gate) -> list[ApprovalRequest]:
    return gate._portal.run(gate.alist(status="pending"))


def next_pending(gate: Gate) -> ApprovalRequest:
    found = wait_until(lambda: pending(gate))
    assert isinstance(found, list)
    return found[0]
