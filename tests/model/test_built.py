"""Models built without validation (model/_built.py) are the models validation builds."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from signoff.model import (
    Action,
    ActionRequest,
    ApprovalRequest,
    CallState,
    DecisionRecord,
    PrincipalInfo,
    ReviewConfig,
)
from signoff.model._built import assign, built

NOW = datetime(2026, 11, 27, 13, 0, 0, 123456, tzinfo=UTC)


def shape(value: Any) -> Any:
    """Everything about a value that a dump, a comparison or a copy could see: for a model its
    class, its field dict in order, its fields set and its extras; for a container its type and
    items; for anything else its type and value."""
    if isinstance(value, BaseModel):
        return (
            type(value),
            list(value.__dict__),
            sorted(value.model_fields_set),
            value.__pydantic_extra__,
            value.__pydantic_private__,
            {k: shape(v) for k, v in value.__dict__.items()},
        )
    if isinstance(value, dict):
        return (dict, {k: shape(v) for k, v in value.items()})
    if isinstance(value, list):
        return (list, [shape(v) for v in value])
    return (type(value), value)


def same_model(fast: BaseModel, slow: BaseModel) -> None:
    assert shape(fast) == shape(slow)
    assert fast == slow
    assert fast.model_dump() == slow.model_dump()
    assert fast.model_dump_json() == slow.model_dump_json()
    assert fast.model_dump(mode="json", exclude_unset=True) == slow.model_dump(
        mode="json", exclude_unset=True
    )
    assert repr(fast) == repr(slow)


def _request_values() -> dict[str, Any]:
    action = built(Action, {"name": "delete_record", "args": {"table": "t", "id": 1}})
    return {
        "id": "req_1",
        "thread": "t1",
        "agent": "bot",
        "principal": PrincipalInfo(id="u", roles=["ops"]),
        "action_requests": [
            ActionRequest(name="delete_record", args={"table": "t"}, tool_call_id="c1", rule="r")
        ],
        "review_configs": [
            ReviewConfig(
                action_name="delete_record", allowed_decisions=["approve"], tool_call_id="c1"
            )
        ],
        "calls": [CallState(tool_call_id="c1", action=action, quorum=2)],
        "created_at": NOW,
        "expires_at": NOW,
        "policy_hash": "abc",
        "waiter": "w",
        "lease_until": NOW,
    }


CASES: list[tuple[type[BaseModel], dict[str, Any]]] = [
    (Action, {"name": "x", "args": {"a": [1, {"b": None}]}}),
    (Action, {"name": "x"}),
    (PrincipalInfo, {"id": "u", "roles": ["a", "b"]}),
    (PrincipalInfo, {"id": "u"}),
    (
        ActionRequest,
        {
            "name": "n",
            "args": {"k": "v"},
            "tool_call_id": "c",
            "rule": "r",
            "reason": None,
            "risk": "high",
            "description": "d",
            "intent": None,
        },
    ),
    (ActionRequest, {"name": "n", "args": {}, "tool_call_id": "c"}),
    (CallState, {"tool_call_id": "c", "quorum": 3, "action": Action(name="n")}),
    (
        DecisionRecord,
        {"tool_call_id": "c", "type": "approve", "approver": "alice", "at": NOW, "message": "ok"},
    ),
    (ApprovalRequest, _request_values()),
    (ApprovalRequest, {**_request_values(), "escalate_at": NOW, "attrs": {"k": [1]}}),
]


@pytest.mark.parametrize(("cls", "values"), CASES)
def test_built_model_is_the_validated_model(cls: type[BaseModel], values: dict[str, Any]) -> None:
    same_model(built(cls, dict(values)), cls(**values))


def test_built_models_get_their_own_default_containers() -> None:
    one = built(CallState, {"tool_call_id": "c", "action": Action(name="n")})
    two = built(CallState, {"tool_call_id": "c", "action": Action(name="n")})
    assert one.approvals is not two.approvals
    assert one.group_approvals is not two.group_approvals
    one.approvals.append("alice")
    assert two.approvals == []


def test_built_refuses_unknown_and_missing_fields() -> None:
    with pytest.raises(TypeError, match="unknown fields \\['nmae'\\]"):
        built(Action, {"nmae": "x", "name": "x"})
    with pytest.raises(TypeError, match="missing fields \\['name'\\]"):
        built(Action, {"args": {}})


@pytest.mark.parametrize("cls", [CallState, ApprovalRequest])
def test_state_machine_models_take_assignment_unvalidated(cls: type[BaseModel]) -> None:
    """assign() writes what pydantic's __setattr__ writes only while these models neither
    validate assignments nor are frozen."""
    assert not cls.model_config.get("validate_assignment")
    assert not cls.model_config.get("frozen")


def test_assign_is_setattr_field_by_field() -> None:
    fast = CallState(tool_call_id="c", action=Action(name="n"))
    slow = CallState(tool_call_id="c", action=Action(name="n"))
    values = {"resolution": "approved", "resolved_by": "alice", "resolved_at": NOW, "stage": 0}
    assign(fast, values)
    for name, value in values.items():
        setattr(slow, name, value)
    same_model(fast, slow)
