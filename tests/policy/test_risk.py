"""Risk: policy risk, code risk (the higher wins), and the approval floor."""

from __future__ import annotations

from tests.policy.helpers import call, ctx, load

FLOOR = """
defaults:
  require_approval_from_risk: high
  approvers: {roles: [admin]}
tools:
  wire: {default: allow, risk: high}
  read: {default: allow, risk: low}
  purge:
    default: allow
    risk: critical
    rules:
      - {id: never-prod, when: {args.env: prod}, decision: deny, reason: forbidden}
      - {id: ok-dev, when: {args.env: dev}, decision: allow}
"""


def test_verdict_carries_tool_risk() -> None:
    policy = load("tools: {t: {default: allow, risk: medium}}")
    assert policy.evaluate(call("t"), ctx()).risk == "medium"


def test_rule_risk_overrides_tool_risk() -> None:
    policy = load(
        """
        tools:
          t:
            risk: low
            rules:
              - {id: r, decision: require_approval, risk: critical, approvers: {any: true}}
        """
    )
    verdict = policy.evaluate(call("t"), ctx())
    assert verdict.risk == "critical"
    assert verdict.review is not None and verdict.review.risk == "critical"


def test_code_risk_raises_the_verdict_risk() -> None:
    policy = load("tools: {t: {default: allow, risk: low}}")
    assert policy.evaluate(call("t"), ctx(), risk="high").risk == "high"


def test_lower_code_risk_does_not_lower_policy_risk() -> None:
    policy = load("tools: {t: {default: allow, risk: high}}")
    assert policy.evaluate(call("t"), ctx(), risk="low").risk == "high"


def test_floor_turns_default_allow_into_approval() -> None:
    verdict = load(FLOOR).evaluate(call("wire"), ctx())
    assert (verdict.kind, verdict.rule) == ("require_approval", "defaults.risk")
    assert verdict.reason is not None and "high" in verdict.reason
    assert verdict.review is not None and verdict.review.approvers.roles == ("admin",)


def test_floor_leaves_low_risk_tools_alone() -> None:
    assert load(FLOOR).evaluate(call("read"), ctx()).kind == "allow"


def test_code_risk_alone_can_trigger_the_floor() -> None:
    verdict = load(FLOOR).evaluate(call("read"), ctx(), risk="critical")
    assert (verdict.rule, verdict.risk) == ("defaults.risk", "critical")


def test_floor_applies_to_unknown_tools_that_would_be_allowed() -> None:
    policy = load(
        """
        defaults:
          unknown_tool: allow
          require_approval_from_risk: high
        """
    )
    assert policy.evaluate(call("x"), ctx()).kind == "allow"
    assert policy.evaluate(call("x"), ctx(), risk="high").rule == "defaults.risk"


def test_deny_still_wins_over_the_floor() -> None:
    verdict = load(FLOOR).evaluate(call("purge", env="prod"), ctx())
    assert (verdict.kind, verdict.rule) == ("deny", "never-prod")


def test_explicit_allow_rule_is_not_overridden_by_the_floor() -> None:
    verdict = load(FLOOR).evaluate(call("purge", env="dev"), ctx())
    assert (verdict.kind, verdict.rule) == ("allow", "ok-dev")


def test_unknown_code_risk_fails_closed() -> None:
    policy = load("tools: {t: {default: allow}}")
    verdict = policy.evaluate(call("t"), ctx(), risk="extreme")  # type: ignore[arg-type]
    assert verdict.rule == "defaults.on_error"
    assert verdict.reason is not None and "unknown risk level 'extreme'" in verdict.reason
