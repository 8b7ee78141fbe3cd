"""Identity through the gate: self-approval and quorum compare people, not spellings;
``gate.strict_principals`` refuses principals nobody listed."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from signoff import Denied, Gate, NotAuthorized, Policy, ToolCall
from signoff.gate.principals import UNKNOWN_PRINCIPAL, PrincipalStage
from signoff.store import AuditQuery, SQLiteStore
from tests.gate.snapshots import SnapshotCheckingStore

POLICY = """
version: 1
people:
  erin:  {roles: [finance], aliases: [ERIN@corp]}
  bob:   {roles: [finance]}
  carol: {roles: [finance]}
  frank: {}
tools:
  get_price:
    default: allow
  pay:
    default: require_approval
    approvers: {roles: [finance]}
  pay_two:
    default: require_approval
    approvers: {roles: [finance], quorum: 2}
"""

STRICT = POLICY + "gate: {strict_principals: true}\n"


def make_gate(text: str, store: Any) -> Gate:
    gate = Gate(Policy.from_yaml(textwrap.dedent(text)), store)
    if "principals" not in [s.name for s in gate.checks.stages]:
        # Until default_pipeline carries the stage, add it the documented way.
        gate.checks.add(PrincipalStage(gate.policy), after="limits")
    return gate


@pytest.fixture(params=["memory", "sqlite"])
def gate(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Gate]:
    store = SnapshotCheckingStore() if request.param == "memory" else SQLiteStore(tmp_path / "s.db")
    g = make_gate(POLICY, store)
    yield g
    g.close()


@pytest.fixture
def strict_gate() -> Iterator[Gate]:
    g = make_gate(STRICT, SnapshotCheckingStore())
    yield g
    g.close()


def submit(gate: Gate, tool: str, principal: str) -> str:
    sub = gate.submit([ToolCall(tool, {"amount": 5})], gate.make_context(principal, thread="t"))
    assert sub.request is not None
    return sub.request.id


def test_request_for_Erin_cannot_be_approved_by_erin(gate: Gate) -> None:
    """Issue 12, found item 6: self-approval compared principal ids exactly."""
    rid = submit(gate, "pay", "Erin")
    with pytest.raises(NotAuthorized, match="forbid_self_approval"):
        gate.decide(rid, [{"type": "approve"}], approver="erin")
    assert gate.run_sync(gate.get(rid)).pending
    req = gate.decide(rid, [{"type": "approve"}], approver="bob")
    assert req.calls[0].resolution == "approved"


def test_a_fullwidth_spelling_is_the_same_person(gate: Gate) -> None:
    rid = submit(gate, "pay", "ｅｒｉｎ")
    with pytest.raises(NotAuthorized):
        gate.decide(rid, [{"type": "approve"}], approver="ERIN")


def test_Bob_and_bob_count_once_towards_a_quorum(gate: Gate) -> None:
    rid = submit(gate, "pay_two", "frank")
    gate.decide(rid, [{"type": "approve"}], approver="Bob")
    req = gate.decide(rid, [{"type": "approve", "message": "again"}], approver="bob")
    assert req.calls[0].approvals == ["Bob"] and req.pending
    req = gate.decide(rid, [{"type": "approve"}], approver="carol")
    assert req.calls[0].resolution == "approved"


def test_a_differently_spelled_listed_person_may_decide(gate: Gate) -> None:
    rid = submit(gate, "pay", "frank")
    req = gate.decide(rid, [{"type": "approve"}], approver="BOB")
    assert req.calls[0].resolved_by == "BOB"  # stored as written


def test_an_alias_cannot_approve_the_persons_own_request(gate: Gate) -> None:
    rid = submit(gate, "pay", "ERIN@corp")
    with pytest.raises(NotAuthorized):
        gate.decide(rid, [{"type": "approve"}], approver="erin")


def test_a_person_and_their_alias_count_once_towards_a_quorum(gate: Gate) -> None:
    rid = submit(gate, "pay_two", "frank")
    gate.decide(rid, [{"type": "approve"}], approver="erin")
    req = gate.decide(rid, [{"type": "approve", "message": "x"}], approver="ERIN@corp")
    assert req.pending


def test_an_alias_decides_with_the_persons_roles(gate: Gate) -> None:
    rid = submit(gate, "pay", "frank")
    req = gate.decide(rid, [{"type": "approve"}], approver="ERIN@corp")
    assert req.calls[0].resolution == "approved"


# ---------------------------------------------------------------------- strict_principals
def guarded(gate: Gate) -> Any:
    @gate.guard
    def get_price(symbol: str) -> str:
        return f"{symbol}: 42"

    return get_price


def test_strict_principals_denies_an_unknown_principal(strict_gate: Gate) -> None:
    get_price = guarded(strict_gate)
    with pytest.raises(Denied) as info, strict_gate.context(principal="mallory"):
        get_price(symbol="ACME")
    assert info.value.verdict is not None
    assert info.value.verdict.rule == UNKNOWN_PRINCIPAL == "unknown_principal"
    assert "'mallory' is not in the people: directory" in str(info.value)


def test_strict_principals_accepts_listed_people_in_any_spelling_or_alias(
    strict_gate: Gate,
) -> None:
    get_price = guarded(strict_gate)
    for who in ("erin", "Erin", "ERIN@corp", "ｆｒａｎｋ"):
        with strict_gate.context(principal=who):
            assert get_price(symbol="ACME") == "ACME: 42"


def test_strict_principals_refuses_before_anything_is_stored(strict_gate: Gate) -> None:
    sub = strict_gate.submit([ToolCall("pay", {"amount": 5})], strict_gate.make_context("eve"))
    assert sub.request is None
    assert sub.verdicts[0].denied and sub.verdicts[0].rule == "unknown_principal"

    async def denied() -> list[str]:
        await strict_gate.store.flush_audit()
        return [r.event for r in await strict_gate.store.read_audit(AuditQuery())]

    assert strict_gate.run_sync(denied()) == ["denied"]


def test_without_strict_principals_anyone_may_be_a_principal(gate: Gate) -> None:
    get_price = guarded(gate)
    with gate.context(principal="mallory"):
        assert get_price(symbol="ACME") == "ACME: 42"


def test_the_stage_reads_the_setting_once() -> None:
    policy = Policy.from_yaml(textwrap.dedent(STRICT))
    assert PrincipalStage(policy).strict is True
    assert PrincipalStage(policy, strict=False).strict is False
    assert PrincipalStage(Policy.from_yaml(textwrap.dedent(POLICY))).strict is False


def test_strict_principals_must_be_a_boolean() -> None:
    from signoff.assemble import check_sections

    policy = Policy.from_yaml(textwrap.dedent(POLICY) + "gate: {strict_principals: sometimes}\n")
    errors, _ = check_sections(policy)
    assert any("gate.strict_principals" in e for e in errors)


def test_the_default_pipeline_has_the_principals_stage() -> None:
    gate = Gate(Policy.from_yaml(textwrap.dedent(STRICT)), SnapshotCheckingStore())
    try:
        assert "principals" in [s.name for s in gate.checks.stages]
    finally:
        gate.close()
