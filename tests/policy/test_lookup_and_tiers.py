"""Which tools: entry applies, and in which order its rules are tried."""

from __future__ import annotations

from tests.policy.helpers import call, ctx, load


def test_exact_name_wins_over_an_earlier_glob() -> None:
    policy = load(
        """
        tools:
          "read_*": {default: deny}
          read_file: {default: allow}
        """
    )
    verdict = policy.evaluate(call("read_file"), ctx())
    assert (verdict.kind, verdict.rule) == ("allow", "read_file.default")


def test_first_glob_in_file_order_wins() -> None:
    policy = load(
        """
        tools:
          "read_*": {default: allow}
          "read_secret*": {default: {decision: deny, reason: secret}}
        """
    )
    assert policy.evaluate(call("read_secrets"), ctx()).rule == "read_*.default"


def test_glob_default_rule_id_is_the_pattern() -> None:
    policy = load('tools:\n  "read_*": {default: allow}\n')
    assert policy.evaluate(call("read_file"), ctx()).rule == "read_*.default"


def test_glob_is_case_sensitive() -> None:
    policy = load('tools:\n  "read_*": {default: allow}\n')
    assert policy.evaluate(call("READ_FILE"), ctx()).rule == "defaults.unknown_tool"


def test_unknown_tool_requires_approval_by_default() -> None:
    verdict = load("tools: {}").evaluate(call("send_email"), ctx())
    assert (verdict.kind, verdict.rule) == ("require_approval", "defaults.unknown_tool")


def test_unknown_tool_can_be_denied() -> None:
    verdict = load("defaults: {unknown_tool: deny}").evaluate(call("send_email"), ctx())
    assert (verdict.kind, verdict.rule) == ("deny", "defaults.unknown_tool")
    assert verdict.reason


def test_unknown_tool_can_be_allowed_with_mapping_form() -> None:
    policy = load("defaults: {unknown_tool: {decision: allow}}")
    assert policy.evaluate(call("x"), ctx()).kind == "allow"


def test_tool_without_default_falls_to_unknown_tool_rule() -> None:
    policy = load(
        """
        defaults: {unknown_tool: deny}
        tools:
          t:
            rules:
              - {id: r, when: {args.a: 1}, decision: allow}
        """
    )
    verdict = policy.evaluate(call("t", a=2), ctx())
    assert (verdict.kind, verdict.rule) == ("deny", "defaults.unknown_tool")


def test_tool_without_default_uses_its_own_approvers() -> None:
    policy = load(
        """
        tools:
          t:
            approvers: {roles: [ops]}
        """
    )
    verdict = policy.evaluate(call("t"), ctx())
    assert verdict.rule == "defaults.unknown_tool"
    assert verdict.review is not None and verdict.review.approvers.roles == ("ops",)


def test_deny_rules_are_tried_before_earlier_allow_rules() -> None:
    policy = load(
        """
        tools:
          t:
            default: require_approval
            rules:
              - {id: ok, when: {args.a: 1}, decision: allow}
              - {id: forbid, when: {args.a: 1}, decision: deny, reason: denied}
        """
    )
    assert policy.evaluate(call("t", a=1), ctx()).rule == "forbid"


def test_approval_rules_are_tried_before_allow_rules() -> None:
    policy = load(
        """
        tools:
          t:
            default: deny
            rules:
              - {id: ok, when: {args.a: 1}, decision: allow}
              - {id: ask, when: {args.a: 1}, decision: require_approval}
        """
    )
    assert policy.evaluate(call("t", a=1), ctx()).rule == "ask"


def test_file_order_within_a_tier() -> None:
    policy = load(
        """
        tools:
          t:
            default: allow
            rules:
              - {id: first, when: {args.a: {gt: 1}}, decision: deny, reason: one}
              - {id: second, when: {args.a: {gt: 0}}, decision: deny, reason: two}
        """
    )
    assert policy.evaluate(call("t", a=5), ctx()).rule == "first"


def test_no_matching_rule_uses_tool_default() -> None:
    policy = load(
        """
        tools:
          t:
            default: allow
            rules:
              - {id: r, when: {args.a: 1}, decision: deny, reason: x}
        """
    )
    verdict = policy.evaluate(call("t", a=2), ctx())
    assert (verdict.kind, verdict.rule) == ("allow", "t.default")


def test_rule_without_when_always_matches() -> None:
    policy = load(
        """
        tools:
          t:
            default: allow
            rules:
              - {id: always, decision: require_approval}
        """
    )
    assert policy.evaluate(call("t"), ctx()).rule == "always"


def test_error_in_a_deny_rule_stops_evaluation_fail_closed() -> None:
    policy = load(
        """
        tools:
          t:
            default: allow
            rules:
              - {id: broken, when: {args.n: {gt: 1}}, decision: deny, reason: x}
              - {id: fine, when: {args.m: 1}, decision: allow}
        """
    )
    verdict = policy.evaluate(call("t", m=1), ctx())
    assert verdict.rule == "defaults.on_error"
    assert verdict.kind == "require_approval"


def test_on_error_deny() -> None:
    policy = load(
        """
        defaults: {on_error: deny}
        tools:
          t:
            rules:
              - {id: r, when: {args.n: {gt: 1}}, decision: allow}
        """
    )
    verdict = policy.evaluate(call("t"), ctx())
    assert (verdict.kind, verdict.rule) == ("deny", "defaults.on_error")
    assert verdict.reason == "policy could not be evaluated (r): missing args.n"


def test_on_error_mapping_form_sets_approvers() -> None:
    policy = load(
        """
        defaults:
          on_error: {decision: require_approval, approvers: {users: [alice]}}
        tools:
          t:
            rules:
              - {id: r, when: {args.n: {gt: 1}}, decision: allow}
        """
    )
    verdict = policy.evaluate(call("t"), ctx())
    assert verdict.review is not None and verdict.review.approvers.users == ("alice",)


def test_public_on_error_uses_given_reason_and_rule() -> None:
    policy = load("defaults: {on_error: deny}")
    verdict = policy.on_error(call("t"), ctx(), "validator raised", rule="validator.t")
    assert (verdict.kind, verdict.rule, verdict.reason) == (
        "deny",
        "validator.t",
        "validator raised",
    )


def test_verdict_carries_short_policy_hash() -> None:
    policy = load("tools: {t: {default: allow}}")
    verdict = policy.evaluate(call("t"), ctx())
    assert len(policy.hash) == 64
    assert verdict.policy_hash == policy.hash[:16] == policy.short_hash


def test_tool_name_that_is_not_a_string_fails_closed() -> None:
    policy = load("tools: {t: {default: allow}}")
    verdict = policy.evaluate(call(["not", "hashable"]), ctx())  # type: ignore[arg-type]
    assert verdict.rule == "defaults.on_error"
