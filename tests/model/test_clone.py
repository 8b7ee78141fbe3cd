"""``ApprovalRequest.copy_for_update`` (``model/_clone.py``): a copy without re-validation
that is equal to the original, serializes the same, and shares nothing that can change."""

from __future__ import annotations

from typing import Any

from signoff.model import ApprovalRequest, utcnow
from signoff.model.inquiries import Inquiry
from signoff.model.requests import DecisionRecord
from tests.store.factories import make_request

NESTED_ARGS: dict[str, Any] = {
    "to": "bob@example.com",
    "rows": [{"id": 1, "tags": ["a", "b"]}, {"id": 2, "tags": []}],
    "opts": {"dry": False, "limits": {"max": 3}},
}


def full_request() -> ApprovalRequest:
    req = make_request(calls=(("call-1", "send_email", NESTED_ARGS),), roles=["ops"], quorum=2)
    req.decisions.append(
        DecisionRecord(tool_call_id="call-1", type="approve", approver="alice", at=utcnow())
    )
    req.calls[0].approvals.append("alice")
    req.attrs = {"ticket": {"id": "T-1", "labels": ["x"]}}
    req.inquiry = Inquiry(question="Which?", choices=["a", "b"])
    return req


def test_a_copy_equals_its_original_and_serializes_the_same() -> None:
    req = full_request()
    copy = req.copy_for_update()
    assert copy == req
    assert copy.model_dump_json() == req.model_dump_json()
    assert copy.model_fields_set == req.model_fields_set
    assert copy.model_dump(exclude_unset=True) == req.model_dump(exclude_unset=True)


def test_changing_a_copy_at_any_depth_leaves_the_original_alone() -> None:
    req = full_request()
    before = req.model_dump_json()
    copy = req.copy_for_update()
    copy.calls[0].action.args["rows"][0]["tags"].append("c")
    copy.calls[0].action.args["opts"]["limits"]["max"] = 9
    copy.action_requests[0].args["to"] = "eve@example.com"
    copy.calls[0].approvals.append("bob")
    copy.decisions.clear()
    copy.review_configs[0].approvers.roles.append("root")
    copy.principal.roles.append("admin")
    copy.attrs["ticket"]["labels"].append("y")
    assert copy.inquiry is not None and copy.inquiry.choices is not None
    copy.inquiry.choices.append("c")
    copy.status = "cancelled"
    assert req.model_dump_json() == before


def test_the_original_changed_after_copying_leaves_the_copy_alone() -> None:
    req = full_request()
    copy = req.copy_for_update()
    snapshot = copy.model_dump_json()
    req.calls[0].action.args["rows"][1]["tags"].append("z")
    req.model_fields_set.add("waiter")
    assert copy.model_dump_json() == snapshot
    assert "waiter" not in copy.model_fields_set


def test_a_copy_is_still_a_validated_model_type_for_type() -> None:
    copy = full_request().copy_for_update()
    assert ApprovalRequest.model_validate(copy.model_dump()) == copy
    assert type(copy.decisions[0]) is DecisionRecord
