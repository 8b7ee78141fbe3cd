"""The rule a grant is for when its creator names none: told from the ``when:`` literals, or
refused with a message saying to name it."""

from __future__ import annotations

import textwrap

import pytest

from signoff import DecisionError, Policy
from signoff.policy.grant_rule import literal_args, resolve_rule

POLICY = Policy.from_yaml(
    textwrap.dedent(
        """
        version: 1
        tools:
          deploy:
            default: require_approval
            rules:
              - id: prod-deploy
                when: {args.target.env: prod}
                decision: require_approval
              - id: staging
                when: {args.target.env: staging}
                decision: allow
          shell:
            default: require_approval
          transfer:
            default: allow
            rules:
              - id: large
                when: {args.amount: {gt: 1000}}
                decision: require_approval
        """
    )
)


def test_literal_args_takes_equalities_only() -> None:
    when = {
        "args.target.env": "prod",
        "args.version": {"eq": "1.2"},
        "args.command": {"first_word_in": ["git"]},
        "principal.id": "erin",
        "all": [{"args.region": "eu"}, {"args.size": {"gt": 3}}],
    }
    assert literal_args(when) == {
        "target": {"env": "prod"},
        "version": "1.2",
        "region": "eu",
    }
    assert literal_args(None) == {}


def test_the_rule_is_told_from_the_literals() -> None:
    assert resolve_rule(POLICY, "deploy", {"args.target.env": "prod"}) == "prod-deploy"
    assert resolve_rule(POLICY, "shell", {"args.command": {"first_word_in": ["git"]}}) == (
        "shell.default"
    )
    assert resolve_rule(POLICY, "transfer", {"args.amount": 5000}) == "large"


@pytest.mark.parametrize(
    ("tool", "when", "says"),
    [
        ("deploy", None, "cannot tell which rule"),  # the rules read args.target.env
        ("transfer", {"args.amount": {"gt": 5000}}, "cannot tell which rule"),
        ("deploy", {"args.target.env": "staging"}, "allows such deploy calls"),
        ("transfer", {"args.amount": 5}, "never apply"),
    ],
)
def test_an_unknown_or_unasked_rule_must_be_named(tool: str, when: object, says: str) -> None:
    with pytest.raises(DecisionError) as caught:
        resolve_rule(POLICY, tool, when)  # type: ignore[arg-type]
    assert caught.value.field == "rule" and says in caught.value.message
    assert "--rule" in caught.value.message


def test_malformed_conditions_are_the_error_reported() -> None:
    with pytest.raises(DecisionError) as caught:
        resolve_rule(POLICY, "deploy", {"args.target.env": {"nope": 1}})
    assert caught.value.field == "when"
