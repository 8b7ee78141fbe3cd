"""Review fields: inheritance rule → tool → defaults → built-in, approvers, deadlines."""

from __future__ import annotations

from signoff.model import ANY_APPROVER, Approvers, ReviewSpec, Verdict
from tests.policy.helpers import call, ctx, load

LAYERED = """
defaults:
  timeout: 2h
  allowed_decisions: [approve, reject, respond]
  approvers: {roles: [admin]}
  notify: [email]
tools:
  t:
    timeout: 30m
    approvers: {roles: [ops]}
    default: require_approval
    rules:
      - id: big
        when: {args.n: {gt: 10}}
        decision: require_approval
        approvers: {roles: [finance], quorum: 2}
"""


def review_of(verdict: Verdict) -> ReviewSpec:
    assert verdict.review is not None, verdict
    return verdict.review


def test_rule_fields_override_tool_fields() -> None:
    review = review_of(load(LAYERED).evaluate(call("t", n=11), ctx()))
    assert review.approvers == Approvers(roles=("finance",), quorum=2)
    assert review.timeout_s == 1800


def test_tool_fields_override_defaults() -> None:
    review = review_of(load(LAYERED).evaluate(call("t", n=1), ctx()))
    assert review.approvers.roles == ("ops",)
    assert review.timeout_s == 1800


def test_defaults_fill_what_rule_and_tool_leave_out() -> None:
    review = review_of(load(LAYERED).evaluate(call("t", n=11), ctx()))
    assert review.allowed_decisions == ("approve", "reject", "respond")
    assert review.notify == ("email",)


def test_built_in_review_defaults() -> None:
    review = review_of(load("tools: {t: {default: require_approval}}").evaluate(call("t"), ctx()))
    assert review.allowed_decisions == ("approve", "reject")
    assert review.approvers == ANY_APPROVER
    assert review.timeout_s == 3600
    assert review.on_timeout == "reject"
    assert review.forbid_self_approval is True
    assert review.allow_thread_approval is True
    assert review.escalate_to is None and review.escalate_after_s is None
    assert review.editable_args == ()


def test_missing_approvers_fall_back_to_any_with_a_warning() -> None:
    policy = load("tools: {t: {default: require_approval}}")
    assert review_of(policy.evaluate(call("t"), ctx())).approvers == ANY_APPROVER
    assert len(policy.warnings) == 1
    assert "signoff.yaml.tools.t.default" in policy.warnings[0]
    assert "any known person may approve" in policy.warnings[0]


def test_no_warning_when_defaults_name_approvers() -> None:
    policy = load(LAYERED)
    assert policy.warnings == []


def test_warning_is_given_once_per_rule() -> None:
    policy = load(
        """
        tools:
          t:
            default: allow
            rules:
              - {id: a, when: {args.x: 1}, decision: require_approval}
              - {id: b, when: {args.x: 2}, decision: require_approval}
        """
    )
    assert len(policy.warnings) == 2
    assert "rules[0]" in policy.warnings[0] and "rules[1]" in policy.warnings[1]


def test_editable_args_star_and_edit() -> None:
    policy = load(
        """
        tools:
          t:
            default: require_approval
            approvers: {any: true}
            allowed_decisions: [approve, edit, reject]
            editable_args: "*"
        """
    )
    review = review_of(policy.evaluate(call("t"), ctx()))
    assert review.editable_args == "*"
    assert review.may_edit("anything")


def test_escalation_defaults_to_half_the_timeout() -> None:
    policy = load(
        """
        tools:
          t:
            default: require_approval
            approvers: {roles: [ops]}
            timeout: 4h
            on_timeout: escalate
            escalate_to: {roles: [admin]}
        """
    )
    review = review_of(policy.evaluate(call("t"), ctx()))
    assert review.on_timeout == "escalate"
    assert review.escalate_to == Approvers(roles=("admin",))
    assert review.escalate_after_s == 7200


def test_explicit_escalate_after_is_kept() -> None:
    policy = load(
        """
        tools:
          t:
            default: require_approval
            approvers: {roles: [ops]}
            timeout: 1h
            on_timeout: escalate
            escalate_to: {users: [alice]}
            escalate_after: 10m
        """
    )
    assert review_of(policy.evaluate(call("t"), ctx())).escalate_after_s == 600


def test_rule_can_turn_escalation_off() -> None:
    policy = load(
        """
        defaults:
          approvers: {roles: [ops]}
          on_timeout: escalate
          escalate_to: {roles: [admin]}
        tools:
          t:
            default: allow
            rules:
              - {id: r, decision: require_approval, on_timeout: reject}
        """
    )
    review = review_of(policy.evaluate(call("t"), ctx()))
    assert review.on_timeout == "reject"
    assert review.escalate_to is None


def test_description_inherits_and_renders() -> None:
    policy = load(
        """
        defaults:
          approvers: {any: true}
          description: "{tool} for {principal.id}"
        tools:
          t: {default: require_approval}
        """
    )
    verdict = policy.evaluate(call("t"), ctx("erin"))
    assert verdict.description == "t for erin"
    assert review_of(verdict).description == "t for erin"


def test_default_description_when_none_is_set() -> None:
    policy = load("tools: {t: {default: require_approval, approvers: {any: true}}}")
    assert policy.evaluate(call("t"), ctx("erin")).description == "t requested by erin"


def test_deny_verdict_has_reason_and_rendered_description() -> None:
    policy = load(
        """
        tools:
          t:
            description: "Delete {args.id}"
            rules:
              - {id: r, decision: deny, reason: never}
        """
    )
    verdict = policy.evaluate(call("t", id=7), ctx())
    assert (verdict.reason, verdict.description) == ("never", "Delete 7")


def test_allow_verdict_has_no_description() -> None:
    policy = load('tools: {t: {default: allow, description: "x {args.a}"}}')
    assert policy.evaluate(call("t", a=1), ctx()).description is None


def test_tool_default_mapping_form_with_reason() -> None:
    policy = load("tools: {t: {default: {decision: deny, reason: retired tool}}}")
    verdict = policy.evaluate(call("t"), ctx())
    assert (verdict.kind, verdict.rule, verdict.reason) == ("deny", "t.default", "retired tool")


def test_bare_default_deny_gets_a_reason() -> None:
    verdict = load("tools: {t: {default: deny}}").evaluate(call("t"), ctx())
    assert verdict.reason and "t" in verdict.reason


def test_flags_can_be_turned_off() -> None:
    policy = load(
        """
        tools:
          t:
            default: require_approval
            approvers: {any: true}
            forbid_self_approval: false
            allow_thread_approval: false
        """
    )
    review = review_of(policy.evaluate(call("t"), ctx()))
    assert (review.forbid_self_approval, review.allow_thread_approval) == (False, False)


def test_directory_warnings_for_unknown_user_and_unheld_role() -> None:
    policy = load(
        """
        people:
          alice: {roles: [admin]}
        tools:
          t:
            default: require_approval
            approvers: {roles: [dba], users: [zed]}
        """
    )
    text = "\n".join(policy.warnings)
    assert "user 'zed' is not in people:" in text
    assert "no person in people: holds role 'dba'" in text


def test_quorum_warning_when_too_few_people_hold_the_role() -> None:
    policy = load(
        """
        people:
          bob: {roles: [finance]}
        tools:
          t:
            default: require_approval
            approvers: {roles: [finance], quorum: 2}
        """
    )
    assert any("quorum 2 but only 1 person(s) can approve" in w for w in policy.warnings)
