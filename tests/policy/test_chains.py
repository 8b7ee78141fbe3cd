"""``approvers: {stages: [...]}`` and ``{all_of: [...]}``: parsed, checked at load with path and
line, warned about by ``policy check``, spelled out by ``policy explain``."""

from __future__ import annotations

from signoff.model import ToolCall
from signoff.policy.explain import chain_lines
from tests.policy.helpers import ctx, load, load_error, messages

TOOL = """\
version: 1
people:
  mia:  {roles: [manager]}
  fay:  {roles: [finance]}
  fred: {roles: [finance]}
tools:
  pay:
    default: require_approval
    approvers:
APPROVERS
"""


def chain_error(approvers: str) -> list[str]:
    return messages(load_error(TOOL.replace("APPROVERS", approvers)))


def test_stages_parse_into_groups_with_their_own_deadlines() -> None:
    policy = load(
        """
        tools:
          pay:
            default: require_approval
            timeout: 2h
            approvers:
              stages:
                - {roles: [manager]}
                - {roles: [finance], quorum: 2, timeout: 1h, on_timeout: escalate,
                   escalate_to: {roles: [cfo]}, escalate_after: 20m}
        """
    )
    verdict = policy.evaluate(ToolCall("pay", {}), ctx())
    assert verdict.review is not None
    approvers = verdict.review.approvers
    assert approvers.chained and approvers.distinct
    assert [g.roles for g in approvers.stages] == [("manager",), ("finance",)]
    assert approvers.quorum == 3  # the chain's total
    second = approvers.stages[1]
    assert (second.timeout_s, second.on_timeout, second.escalate_after_s) == (
        3600,
        "escalate",
        1200,
    )
    assert second.escalate_to is not None and second.escalate_to.roles == ("cfo",)
    assert approvers.stages[0].timeout_s is None  # the review's 2h
    assert not approvers.needs_one


def test_all_of_parses_and_distinct_can_be_turned_off() -> None:
    policy = load(
        """
        tools:
          grant_access:
            default: require_approval
            approvers: {all_of: [{roles: [finance]}, {users: [sam]}], distinct: false}
        """
    )
    verdict = policy.evaluate(ToolCall("grant_access", {}), ctx())
    assert verdict.review is not None
    approvers = verdict.review.approvers
    assert [g.roles or g.users for g in approvers.all_of] == [("finance",), ("sam",)]
    assert approvers.distinct is False


def test_both_stages_and_roles_is_an_error_with_path_and_line() -> None:
    (msg,) = chain_error("      roles: [finance]\n      stages: [{roles: [manager]}]")
    assert msg.startswith("signoff.yaml.tools.pay.approvers (line 9): unknown key(s) ['roles']")
    assert "put roles, users and quorum inside each group of stages" in msg


def test_empty_stages_is_an_error() -> None:
    (msg,) = chain_error("      stages: []")
    assert msg.startswith("signoff.yaml.tools.pay.approvers (line 9): stages is a non-empty list")


def test_unknown_key_in_a_stage_names_the_stage() -> None:
    msgs = chain_error(
        "      stages:\n        - {roles: [manager]}\n        - {roles: [finance], quorom: 2}"
    )
    assert any(
        m.startswith(
            "signoff.yaml.tools.pay.approvers.stages[1] (line 12): unknown key(s) ['quorom']"
        )
        for m in msgs
    ), msgs


def test_stages_and_all_of_together_is_an_error() -> None:
    (msg,) = chain_error("      stages: [{roles: [manager]}]\n      all_of: [{roles: [finance]}]")
    assert "use stages (one after the other) or all_of (at once), not both" in msg


def test_all_of_groups_have_no_deadline_of_their_own() -> None:
    msgs = chain_error("      all_of: [{roles: [manager], timeout: 1h}, {roles: [finance]}]")
    assert any("['timeout'] only apply to stages" in m for m in msgs), msgs


def test_a_stage_without_anyone_is_an_error() -> None:
    msgs = chain_error("      stages: [{quorum: 2}]")
    assert any("stages[0]" in m and "name who approves" in m for m in msgs), msgs


def test_on_timeout_allow_before_the_last_stage_is_refused() -> None:
    msgs = chain_error(
        "      stages:\n        - {roles: [manager], on_timeout: allow}\n"
        "        - {roles: [finance]}"
    )
    assert any(
        "stages[0]" in m and "on_timeout: allow at stage 1 of 2 would approve without" in m
        for m in msgs
    ), msgs


def test_inherited_on_timeout_allow_before_the_last_stage_is_refused_too() -> None:
    err = load_error(
        TOOL.replace("    approvers:", "    on_timeout: allow\n    approvers:").replace(
            "APPROVERS", "      stages: [{roles: [manager]}, {roles: [finance]}]"
        )
    )
    assert any("on_timeout: allow at stage 1 of 2" in m for m in messages(err))


def test_stage_escalation_needs_escalate_to() -> None:
    msgs = chain_error("      stages: [{roles: [manager], on_timeout: escalate}]")
    assert any("stages[0]" in m and "needs escalate_to" in m for m in msgs), msgs


def test_stage_escalate_after_must_be_shorter_than_its_timeout() -> None:
    msgs = chain_error(
        "      stages: [{roles: [manager], timeout: 10m, on_timeout: escalate,"
        " escalate_to: {roles: [finance]}, escalate_after: 10m}]"
    )
    assert any(
        "escalate_after (10m) must be shorter than the stage's timeout (10m)" in m for m in msgs
    )


def test_policy_check_warns_when_nobody_can_satisfy_a_stage() -> None:
    policy = load(
        TOOL.replace("APPROVERS", "      stages: [{roles: [manager]}, {roles: [auditor]}]")
    )
    assert any(
        "approvers.stages[1]" in w and "no person in people: holds role 'auditor'" in w
        for w in policy.warnings
    ), policy.warnings


def test_policy_check_warns_when_a_stage_quorum_is_out_of_reach() -> None:
    policy = load(TOOL.replace("APPROVERS", "      all_of: [{roles: [finance], quorum: 3}]"))
    assert any("all_of[0]" in w and "quorum 3 but only 2" in w for w in policy.warnings)


def test_policy_check_warns_when_the_chain_needs_more_distinct_people_than_exist() -> None:
    policy = load(
        TOOL.replace(
            "APPROVERS",
            "      stages: [{roles: [manager, finance], quorum: 2}, {roles: [finance], quorum: 2}]",
        )
    )
    assert any("needs 4 different people (distinct: true) but only 3" in w for w in policy.warnings)


def test_a_satisfiable_chain_loads_without_warnings() -> None:
    policy = load(
        TOOL.replace(
            "APPROVERS", "      stages: [{roles: [manager]}, {roles: [finance], quorum: 2}]"
        )
    )
    assert policy.warnings == []


def test_explain_prints_the_chain() -> None:
    policy = load(
        """
        tools:
          pay:
            default: require_approval
            timeout: 2h
            approvers:
              stages:
                - {roles: [manager]}
                - {roles: [finance], quorum: 2, timeout: 1h, on_timeout: escalate,
                   escalate_to: {roles: [cfo]}}
        """
    )
    verdict = policy.evaluate(ToolCall("pay", {}), ctx())
    assert verdict.review is not None
    assert chain_lines(verdict.review) == [
        "2 stages, one after the other (a person counts once):",
        "  stage 1: role manager; deadline 7200s after it starts, on_timeout reject",
        "  stage 2: 2 of role finance; deadline 3600s after it starts, on_timeout escalate"
        " to role cfo",
    ]
    doc = policy.explain(ToolCall("pay", {}), ctx()).to_dict()
    assert doc["verdict"]["review"]["approvers"]["stages"][1]["quorum"] == 2
    assert doc["verdict"]["review"]["chain"][0].startswith("2 stages")
