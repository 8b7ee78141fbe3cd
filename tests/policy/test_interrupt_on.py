"""LangChain's ``interrupt_on`` shorthand."""

from __future__ import annotations

from typing import Any

import pytest

from signoff.model import ANY_APPROVER, PolicyError
from signoff.policy import Policy
from tests.policy.helpers import call, ctx


def test_true_requires_approval_with_every_decision_type() -> None:
    verdict = Policy.from_interrupt_on({"write_file": True}).evaluate(call("write_file"), ctx())
    assert (verdict.kind, verdict.rule) == ("require_approval", "interrupt_on.write_file")
    assert verdict.review is not None
    assert verdict.review.allowed_decisions == ("approve", "edit", "reject", "respond")
    assert verdict.review.editable_args == "*"
    assert verdict.review.approvers == ANY_APPROVER
    assert verdict.review.forbid_self_approval is False


def test_dict_narrows_the_decisions_and_sets_description() -> None:
    policy = Policy.from_interrupt_on(
        {"execute_sql": {"allowed_decisions": ["approve", "reject"], "description": "Run SQL"}}
    )
    verdict = policy.evaluate(call("execute_sql", q="x"), ctx())
    assert verdict.review is not None
    assert verdict.review.allowed_decisions == ("approve", "reject")
    assert verdict.description == "Run SQL"


def test_description_braces_are_literal_text() -> None:
    policy = Policy.from_interrupt_on(
        {"t": {"allowed_decisions": ["approve"], "description": "Approve {this}?"}}
    )
    assert policy.evaluate(call("t"), ctx()).description == "Approve {this}?"


def test_false_and_absent_tools_are_allowed() -> None:
    policy = Policy.from_interrupt_on({"read_data": False})
    for name in ("read_data", "anything_else"):
        verdict = policy.evaluate(call(name), ctx())
        assert (verdict.kind, verdict.rule) == ("allow", "defaults.unknown_tool")


@pytest.mark.parametrize(
    "config",
    [{}, {"allowed_decisions": []}, {"allowed_decisions": None}, {"allowed_decision": ["approve"]}],
    ids=["empty", "empty-list", "none", "typo"],
)
def test_dict_without_allowed_decisions_is_an_error(config: dict[str, Any]) -> None:
    with pytest.raises(PolicyError) as info:
        Policy.from_interrupt_on({"delete_file": config})
    assert "'delete_file'" in str(info.value)


def test_unknown_decision_type_is_an_error() -> None:
    with pytest.raises(PolicyError) as info:
        Policy.from_interrupt_on({"t": {"allowed_decisions": ["approve", "maybe"]}})
    assert info.value.path == "interrupt_on.t.allowed_decisions"


def test_non_bool_non_dict_value_is_an_error() -> None:
    with pytest.raises(PolicyError):
        Policy.from_interrupt_on({"t": "yes"})  # type: ignore[dict-item]


def test_when_and_callable_description_are_kept_for_the_integration() -> None:
    def when(request: object) -> bool:
        return True

    def describe(*args: object) -> str:
        return "custom"

    policy = Policy.from_interrupt_on(
        {"t": {"allowed_decisions": ["approve"], "when": when, "description": describe}}
    )
    assert policy.interrupt_on_extras == {"t": {"when": when, "description": describe}}
    assert policy.evaluate(call("t"), ctx()).description == "t requested by erin"


def test_interrupt_on_policy_has_a_stable_hash() -> None:
    one = Policy.from_interrupt_on({"a": True, "b": False})
    two = Policy.from_interrupt_on({"b": False, "a": True})
    assert one.hash == two.hash
    assert one.warnings == []
