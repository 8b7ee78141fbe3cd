"""People compare after NFKC + casefold: self-approval, quorum distinctness, repeats."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from signoff.model import (
    ActionRequest,
    ApprovalRequest,
    ApproversInfo,
    CallState,
    DecisionRecord,
    NotAuthorized,
    PrincipalInfo,
    ReviewConfig,
    person_key,
    same_person,
)
from signoff.model.identity import contains_person
from signoff.model.requests import Action
from signoff.model.resolution import apply_decisions, is_self_approval, may_decide
from signoff.model.verdicts import Approvers

NOW = datetime(2025, 1, 31, 12, 0, tzinfo=UTC)


def request(
    principal: str = "Erin", quorum: int = 1, users: tuple[str, ...] = ()
) -> ApprovalRequest:
    approvers = ApproversInfo(roles=[] if users else ["finance"], users=list(users), quorum=quorum)
    return ApprovalRequest(
        id="req_1",
        thread="t-1",
        principal=PrincipalInfo(id=principal),
        action_requests=[ActionRequest(name="pay", args={"amount": 5}, tool_call_id="c1")],
        review_configs=[
            ReviewConfig(
                action_name="pay",
                allowed_decisions=["approve", "reject"],
                tool_call_id="c1",
                approvers=approvers,
            )
        ],
        calls=[
            CallState(
                tool_call_id="c1", action=Action(name="pay", args={"amount": 5}), quorum=quorum
            )
        ],
        created_at=NOW,
        expires_at=NOW + timedelta(hours=1),
    )


def approve(who: str, type: str = "approve", message: str | None = None) -> DecisionRecord:
    return DecisionRecord(
        tool_call_id="c1",
        type=type,  # type: ignore[arg-type]
        approver=who,
        at=NOW,
        message=message,
    )


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Erin", "erin"),
        ("ERIN", "erin"),
        ("ｅｒｉｎ", "erin"),  # fullwidth letters (NFKC)
        ("Straße", "STRASSE"),  # casefold, not lower()
        ("ǰ", "ǰ"),  # folds to j + combining caron: normalised again after folding
        ("ﬁona", "fiona"),  # the ligature fi (NFKC)
    ],
)
def test_names_that_are_one_person(a: str, b: str) -> None:
    assert person_key(a) == person_key(b)
    assert same_person(a, b)


@pytest.mark.parametrize(("a", "b"), [("erin", "erin2"), ("erin", "er in"), ("erin", "")])
def test_names_that_are_different_people(a: str, b: str) -> None:
    assert not same_person(a, b)


def test_nobody_is_never_the_same_person() -> None:
    assert not same_person(None, None)
    assert not same_person("erin", None)


def test_contains_person_ignores_case() -> None:
    assert contains_person(["Bob", "alice"], "bob")
    assert not contains_person(["Bob"], "bobby")


def test_request_for_Erin_cannot_be_approved_by_erin() -> None:
    """The attack from issue 12: self-approval compared ids exactly."""
    req = request(principal="Erin")
    with pytest.raises(
        NotAuthorized, match=r"erin made this call \(as Erin\).*forbid_self_approval"
    ) as info:
        apply_decisions(req, [approve("erin")], approver_roles={"finance"}, now=NOW)
    assert info.value.field == "approver"


@pytest.mark.parametrize("approver", ["ERIN", "ｅｒｉｎ", "erin"])
def test_every_spelling_of_the_principal_is_refused(approver: str) -> None:
    with pytest.raises(NotAuthorized):
        apply_decisions(request("Erin"), [approve(approver)], approver_roles={"finance"}, now=NOW)


def test_the_principal_may_still_reject_their_own_call_in_any_spelling() -> None:
    tr = apply_decisions(
        request("Erin"), [approve("erin", "reject")], approver_roles={"finance"}, now=NOW
    )
    assert tr.request.calls[0].resolution == "rejected"


def test_is_self_approval_respects_the_setting() -> None:
    req = request("Erin")
    cfg = req.review_configs[0]
    assert is_self_approval(cfg, req, "erin")
    assert not is_self_approval(cfg.model_copy(update={"forbid_self_approval": False}), req, "erin")


def test_Bob_and_bob_are_one_approver_for_a_quorum() -> None:
    req = request("frank", quorum=2)
    first = apply_decisions(req, [approve("Bob")], approver_roles={"finance"}, now=NOW).request
    # A new message makes it a new decision (not a repeat): it still may not count twice.
    second = apply_decisions(
        first, [approve("bob", message="me again")], approver_roles={"finance"}, now=NOW
    )
    call = second.request.calls[0]
    assert call.approvals == ["Bob"]  # stored as first written; one person
    assert call.resolution is None


def test_a_fullwidth_second_approval_does_not_complete_a_quorum() -> None:
    req = request("frank", quorum=2)
    first = apply_decisions(req, [approve("bob")], approver_roles={"finance"}, now=NOW).request
    tr = apply_decisions(
        first, [approve("ｂｏｂ", message="x")], approver_roles={"finance"}, now=NOW
    )
    assert tr.request.calls[0].resolution is None
    assert tr.request.status == "pending"


def test_a_repeat_in_another_case_is_an_idempotent_no_op() -> None:
    req = request("frank", quorum=2)
    first = apply_decisions(req, [approve("bob")], approver_roles={"finance"}, now=NOW).request
    tr = apply_decisions(first, [approve("BOB")], approver_roles={"finance"}, now=NOW)
    assert tr.changed is False


def test_listed_users_match_in_any_case() -> None:
    req = request("frank", users=("Alice",))
    assert may_decide(req.review_configs[0], req, "alice", ()) is None
    assert Approvers(users=("Alice",)).admits("ALICE", ())
    assert not Approvers(users=("Alice",)).admits("alicia", ())


def test_a_key_function_makes_aliases_one_person() -> None:
    aliases = {"erin@corp": "erin", "erin": "erin"}

    def key(name: str) -> str:
        return aliases.get(person_key(name), person_key(name))

    with pytest.raises(NotAuthorized):
        apply_decisions(
            request("ERIN@corp"), [approve("Erin")], approver_roles={"finance"}, now=NOW, key=key
        )
    first = apply_decisions(
        request("frank", quorum=2), [approve("erin")], approver_roles={"finance"}, now=NOW, key=key
    ).request
    tr = apply_decisions(
        first, [approve("ERIN@corp", message="x")], approver_roles={"finance"}, now=NOW, key=key
    )
    assert tr.request.calls[0].approvals == ["erin"]


def test_old_decision_rows_without_os_user_still_load() -> None:
    row = approve("bob").model_dump(mode="json")
    del row["os_user"]
    assert DecisionRecord.model_validate(row).os_user is None


def test_os_user_is_in_the_audit_event_of_a_decision() -> None:
    record = approve("bob").model_copy(update={"os_user": "ops1", "channel": "cli"})
    tr = apply_decisions(request("frank"), [record], approver_roles={"finance"}, now=NOW)
    decided = [e for e in tr.events if e.event == "decided"]
    assert decided[0].data["os_user"] == "ops1"
    assert tr.request.decisions[0].os_user == "ops1"
