"""Policy tests as data: ``run_cases``."""

from __future__ import annotations

from pathlib import Path

import pytest

from signoff.model import PolicyError
from signoff.policy import run_cases
from tests.policy.helpers import load

POLICY = """
people:
  bob: {roles: [finance]}
tools:
  transfer_funds:
    default: allow
    rules:
      - id: large-transfer
        when: {args.amount: {gt: 10000}}
        decision: require_approval
        approvers: {roles: [finance], quorum: 2}
  office:
    default: allow
    rules:
      - id: after-hours
        when: {not: {context.time: {hours_between: [9, 18]}}}
        decision: deny
        reason: outside office hours
  finance_only:
    default: allow
    rules:
      - id: not-finance
        when: {not: {principal.roles: {contains: finance}}}
        decision: deny
        reason: finance only
  limited:
    default: allow
    rules:
      - id: burst
        when: {rate: {max: 3, per: 1m}}
        decision: deny
        reason: slow down
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cases.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_passing_cases(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
cases:
  - name: big transfer needs two finance approvers
    tool: transfer_funds
    args: {amount: 50000, to: ACME}
    principal: erin
    expect: {verdict: require_approval, rule: large-transfer, quorum: 2, roles: [finance]}
  - tool: transfer_funds
    args: {amount: 5}
    expect: {verdict: allow, rule: transfer_funds.default}
  - name: night
    tool: office
    context: {time: "2026-11-20T22:00:00+00:00"}
    expect: {verdict: deny, reason: office hours}
  - name: directory roles win
    tool: finance_only
    principal: {id: bob, roles: []}
    expect: {verdict: allow}
  - name: given roles when not listed
    tool: finance_only
    principal: {id: zed, roles: [finance]}
    expect: {verdict: allow}
  - name: rate limit reached
    tool: limited
    rate_count: 3
    expect: {verdict: deny, rule: burst}
""",
    )
    results = run_cases(load(POLICY), path)
    assert [r.problems for r in results] == [[]] * 6
    assert all(r.passed for r in results)
    assert results[1].name == "case 2"


def test_failing_case_lists_each_mismatch(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
cases:
  - name: wrong
    tool: transfer_funds
    args: {amount: 50000}
    expect: {verdict: allow, rule: transfer_funds.default, quorum: 1}
""",
    )
    [result] = run_cases(load(POLICY), path)
    assert not result.passed
    assert result.got.rule == "large-transfer"
    assert result.problems[0].startswith("verdict: expected allow, got require_approval")
    assert any(p.startswith("rule: expected") for p in result.problems)
    assert any(p == "quorum: expected 1, got 2" for p in result.problems)
    assert result.line == 3


def test_case_context_extra_keys_become_attrs(tmp_path: Path) -> None:
    policy = load(
        "tools:\n  t:\n    default: allow\n    rules:\n"
        "      - {id: acme, when: {context.tenant: acme}, decision: deny, reason: x}\n"
    )
    path = write(
        tmp_path, "cases:\n  - {tool: t, context: {tenant: acme}, expect: {verdict: deny}}\n"
    )
    assert run_cases(policy, path)[0].passed


def test_malformed_case_file_names_path_and_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "cases:\n  - tool: t\n    expect: {verdict: maybe}\n",
    )
    with pytest.raises(PolicyError) as info:
        run_cases(load(POLICY), path)
    assert info.value.path == "cases.yaml.cases[0].expect.verdict"
    assert info.value.line == 3


def test_unknown_case_key_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "cases:\n  - tool: t\n    expected: {verdict: allow}\n")
    with pytest.raises(PolicyError) as info:
        run_cases(load(POLICY), path)
    assert "unknown key(s) ['expected']" in str(info.value)


def test_cases_file_must_have_cases(tmp_path: Path) -> None:
    with pytest.raises(PolicyError):
        run_cases(load(POLICY), write(tmp_path, "- tool: t\n"))


def test_bad_case_time_is_an_error(tmp_path: Path) -> None:
    path = write(
        tmp_path, "cases:\n  - {tool: t, context: {time: tomorrow}, expect: {verdict: allow}}\n"
    )
    with pytest.raises(PolicyError) as info:
        run_cases(load(POLICY), path)
    assert info.value.path == "cases.yaml.cases[0].context.time"
