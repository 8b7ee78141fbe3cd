"""``any``, ``all`` and ``not``, and how they treat evaluation errors."""

from __future__ import annotations

from tests.policy.helpers import call, kind_of, one_rule

MATCH, NO_MATCH, ERROR = "deny", "allow", "error"


def test_all_entries_of_a_when_mapping_must_hold() -> None:
    policy = one_rule({"args.table": "users", "args.id": 1})
    assert kind_of(policy, call("t", table="users", id=1)) == MATCH
    assert kind_of(policy, call("t", table="users", id=2)) == NO_MATCH


def test_when_mapping_stops_at_first_failing_entry() -> None:
    # `id` is missing, but `table` already fails, so the rule simply does not match.
    policy = one_rule({"args.table": "users", "args.id": 1})
    assert kind_of(policy, call("t", table="orders")) == NO_MATCH


def test_any_matches_when_one_branch_holds() -> None:
    policy = one_rule({"any": [{"args.a": 1}, {"args.b": 2}]})
    assert kind_of(policy, call("t", a=0, b=2)) == MATCH


def test_any_does_not_match_when_no_branch_holds() -> None:
    policy = one_rule({"any": [{"args.a": 1}, {"args.b": 2}]})
    assert kind_of(policy, call("t", a=0, b=0)) == NO_MATCH


def test_any_error_in_a_branch_before_a_match_is_an_error() -> None:
    policy = one_rule({"any": [{"args.a": 1}, {"args.b": 2}]})
    assert kind_of(policy, call("t", b=2)) == ERROR


def test_all_combinator_needs_every_branch() -> None:
    policy = one_rule({"all": [{"args.a": 1}, {"args.b": 2}]})
    assert kind_of(policy, call("t", a=1, b=2)) == MATCH
    assert kind_of(policy, call("t", a=1, b=3)) == NO_MATCH


def test_not_negates() -> None:
    policy = one_rule({"not": {"args.env": "prod"}})
    assert kind_of(policy, call("t", env="dev")) == MATCH
    assert kind_of(policy, call("t", env="prod")) == NO_MATCH


def test_not_of_an_error_stays_an_error() -> None:
    # Negating "could not tell" must never become "yes".
    policy = one_rule({"not": {"args.env": "prod"}})
    assert kind_of(policy, call("t")) == ERROR


def test_combinators_nest() -> None:
    when = {"any": [{"all": [{"args.a": 1}, {"not": {"args.b": 1}}]}, {"args.c": 1}]}
    policy = one_rule(when)
    assert kind_of(policy, call("t", a=1, b=2, c=0)) == MATCH
    assert kind_of(policy, call("t", a=1, b=1, c=0)) == NO_MATCH
    assert kind_of(policy, call("t", a=0, b=1, c=1)) == MATCH


def test_empty_when_matches_every_call() -> None:
    assert kind_of(one_rule({}), call("t")) == MATCH
