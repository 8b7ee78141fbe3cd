"""The shipped example policy loads cleanly and passes its own cases file."""

from __future__ import annotations

from signoff.policy import Policy, run_cases
from tests.policy.helpers import EXAMPLES


def test_example_policy_loads_without_warnings() -> None:
    assert Policy.load(EXAMPLES / "signoff.yaml").warnings == []


def test_example_cases_all_pass() -> None:
    results = run_cases(Policy.load(EXAMPLES / "signoff.yaml"), EXAMPLES / "policy_cases.yaml")
    assert len(results) >= 15
    assert [(r.name, r.problems) for r in results if not r.passed] == []
