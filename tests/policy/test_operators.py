"""Every operator: matches, does not match, and fails closed on a wrong type or missing field.

``one_rule`` builds tool ``t`` with a single deny rule, so "deny" means the condition held,
"allow" means it did not, and "error" means the on_error verdict came back.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.policy.helpers import call, ctx, kind_of, one_rule

MATCH, NO_MATCH, ERROR = "deny", "allow", "error"

CASES: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    # (test id, when, args, expected)
    ("eq_shorthand_true", {"args.x": "a"}, {"x": "a"}, MATCH),
    ("eq_shorthand_false", {"args.x": "a"}, {"x": "b"}, NO_MATCH),
    ("eq_number_true", {"args.x": {"eq": 1}}, {"x": 1}, MATCH),
    ("eq_int_equals_float", {"args.x": {"eq": 1}}, {"x": 1.0}, MATCH),
    ("eq_str_vs_int_is_error", {"args.x": {"eq": 1}}, {"x": "1"}, ERROR),
    ("eq_bool_is_not_a_number", {"args.x": {"eq": 1}}, {"x": True}, ERROR),
    ("eq_bool_true", {"args.x": {"eq": True}}, {"x": True}, MATCH),
    ("eq_null_true", {"args.x": {"eq": None}}, {"x": None}, MATCH),
    ("eq_null_false", {"args.x": {"eq": None}}, {"x": "a"}, NO_MATCH),
    ("eq_null_value_vs_str_is_error", {"args.x": "a"}, {"x": None}, ERROR),
    ("eq_missing_is_error", {"args.x": "a"}, {}, ERROR),
    ("ne_true", {"args.x": {"ne": "a"}}, {"x": "b"}, MATCH),
    ("ne_false", {"args.x": {"ne": "a"}}, {"x": "a"}, NO_MATCH),
    ("ne_type_mismatch_is_error", {"args.x": {"ne": "a"}}, {"x": 3}, ERROR),
    ("ne_missing_is_error", {"args.x": {"ne": "a"}}, {}, ERROR),
    ("gt_true", {"args.x": {"gt": 10}}, {"x": 11}, MATCH),
    ("gt_false_at_bound", {"args.x": {"gt": 10}}, {"x": 10}, NO_MATCH),
    ("gt_str_value_is_error", {"args.x": {"gt": 10}}, {"x": "50000"}, ERROR),
    ("gt_missing_is_error", {"args.x": {"gt": 10}}, {}, ERROR),
    ("gte_true_at_bound", {"args.x": {"gte": 10}}, {"x": 10}, MATCH),
    ("gte_false", {"args.x": {"gte": 10}}, {"x": 9.5}, NO_MATCH),
    ("gte_bool_is_error", {"args.x": {"gte": 0}}, {"x": False}, ERROR),
    ("lt_true", {"args.x": {"lt": 10}}, {"x": 9}, MATCH),
    ("lt_false", {"args.x": {"lt": 10}}, {"x": 10}, NO_MATCH),
    ("lt_list_is_error", {"args.x": {"lt": 10}}, {"x": [1]}, ERROR),
    ("lte_true", {"args.x": {"lte": 10}}, {"x": 10}, MATCH),
    ("lte_false", {"args.x": {"lte": 10}}, {"x": 11}, NO_MATCH),
    ("lte_strings_compare_as_text", {"args.x": {"lte": "m"}}, {"x": "a"}, MATCH),
    ("lte_str_operand_number_value_is_error", {"args.x": {"lte": "m"}}, {"x": 1}, ERROR),
    ("in_true", {"args.x": {"in": ["a", "b"]}}, {"x": "b"}, MATCH),
    ("in_false", {"args.x": {"in": ["a", "b"]}}, {"x": "c"}, NO_MATCH),
    ("in_kind_mismatch_is_error", {"args.x": {"in": [1, 2]}}, {"x": "1"}, ERROR),
    ("in_bool_not_in_numbers", {"args.x": {"in": [1, 2]}}, {"x": True}, ERROR),
    ("in_mixed_kinds_list", {"args.x": {"in": [1, "a"]}}, {"x": "a"}, MATCH),
    ("in_missing_is_error", {"args.x": {"in": ["a"]}}, {}, ERROR),
    ("not_in_true", {"args.x": {"not_in": ["a", "b"]}}, {"x": "c"}, MATCH),
    ("not_in_false", {"args.x": {"not_in": ["a", "b"]}}, {"x": "a"}, NO_MATCH),
    ("not_in_mismatch_is_error", {"args.x": {"not_in": ["a"]}}, {"x": 1}, ERROR),
    ("contains_text_true", {"args.x": {"contains": "prod"}}, {"x": "my-prod-db"}, MATCH),
    ("contains_text_false", {"args.x": {"contains": "prod"}}, {"x": "staging"}, NO_MATCH),
    ("contains_list_true", {"args.x": {"contains": "b"}}, {"x": ["a", "b"]}, MATCH),
    ("contains_list_false", {"args.x": {"contains": "z"}}, {"x": ["a", "b"]}, NO_MATCH),
    ("contains_list_number_not_bool", {"args.x": {"contains": 1}}, {"x": [True]}, NO_MATCH),
    ("contains_mapping_key", {"args.x": {"contains": "k"}}, {"x": {"k": 1}}, MATCH),
    ("contains_number_in_text_is_error", {"args.x": {"contains": 1}}, {"x": "1"}, ERROR),
    ("contains_on_number_is_error", {"args.x": {"contains": "a"}}, {"x": 5}, ERROR),
    ("first_word_in_true", {"args.c": {"first_word_in": ["ls"]}}, {"c": "ls -la"}, MATCH),
    ("first_word_in_false", {"args.c": {"first_word_in": ["ls"]}}, {"c": "rm -rf /"}, NO_MATCH),
    ("first_word_in_empty_text", {"args.c": {"first_word_in": ["ls"]}}, {"c": "  "}, NO_MATCH),
    ("first_word_in_number_is_error", {"args.c": {"first_word_in": ["ls"]}}, {"c": 1}, ERROR),
    ("starts_with_true", {"args.p": {"starts_with": "/tmp/"}}, {"p": "/tmp/x"}, MATCH),
    ("starts_with_list", {"args.p": {"starts_with": ["/a", "/b"]}}, {"p": "/b/c"}, MATCH),
    ("starts_with_false", {"args.p": {"starts_with": "/tmp/"}}, {"p": "/etc/x"}, NO_MATCH),
    ("starts_with_mismatch_is_error", {"args.p": {"starts_with": "/"}}, {"p": None}, ERROR),
    ("ends_with_true", {"args.p": {"ends_with": ".csv"}}, {"p": "a.csv"}, MATCH),
    ("ends_with_false", {"args.p": {"ends_with": ".csv"}}, {"p": "a.txt"}, NO_MATCH),
    ("ends_with_mismatch_is_error", {"args.p": {"ends_with": ".csv"}}, {"p": 3}, ERROR),
    ("glob_true", {"args.p": {"glob": "/data/*.csv"}}, {"p": "/data/a.csv"}, MATCH),
    ("glob_false", {"args.p": {"glob": "/data/*.csv"}}, {"p": "/data/a.txt"}, NO_MATCH),
    ("glob_is_case_sensitive", {"args.p": {"glob": "*.CSV"}}, {"p": "a.csv"}, NO_MATCH),
    ("glob_list", {"args.p": {"glob": ["*.a", "*.b"]}}, {"p": "x.b"}, MATCH),
    ("glob_mismatch_is_error", {"args.p": {"glob": "*"}}, {"p": 1}, ERROR),
    ("matches_true", {"args.s": {"matches": "[;&|]"}}, {"s": "ls; rm"}, MATCH),
    ("matches_searches_anywhere", {"args.s": {"matches": "rm"}}, {"s": "ls; rm"}, MATCH),
    ("matches_false", {"args.s": {"matches": "[;&|]"}}, {"s": "ls -la"}, NO_MATCH),
    ("matches_mismatch_is_error", {"args.s": {"matches": "x"}}, {"s": ["x"]}, ERROR),
    ("not_matches_true", {"args.s": {"not_matches": "[;&|]"}}, {"s": "ls -la"}, MATCH),
    ("not_matches_false", {"args.s": {"not_matches": "[;&|]"}}, {"s": "ls; rm"}, NO_MATCH),
    ("not_matches_missing_is_error", {"args.s": {"not_matches": "x"}}, {}, ERROR),
    ("exists_true", {"args.x": {"exists": True}}, {"x": 0}, MATCH),
    ("exists_true_absent", {"args.x": {"exists": True}}, {}, NO_MATCH),
    ("exists_false_absent", {"args.x": {"exists": False}}, {}, MATCH),
    ("exists_false_present", {"args.x": {"exists": False}}, {"x": 1}, NO_MATCH),
    ("exists_with_other_op_absent", {"args.x": {"exists": True, "gt": 1}}, {}, NO_MATCH),
    ("exists_with_other_op_present", {"args.x": {"exists": True, "gt": 1}}, {"x": 2}, MATCH),
    ("nested_args_true", {"args.target.env": "prod"}, {"target": {"env": "prod"}}, MATCH),
    ("nested_args_missing_is_error", {"args.target.env": "prod"}, {"target": {}}, ERROR),
    ("nested_args_through_text_is_error", {"args.target.env": "prod"}, {"target": "x"}, ERROR),
    ("nested_exists_through_text", {"args.target.env": {"exists": False}}, {"target": "x"}, MATCH),
    ("several_operators_all_hold", {"args.x": {"gt": 1, "lt": 5}}, {"x": 3}, MATCH),
    ("several_operators_one_fails", {"args.x": {"gt": 1, "lt": 5}}, {"x": 7}, NO_MATCH),
    ("tool_field", {"tool": "t"}, {}, MATCH),
]


@pytest.mark.parametrize(
    ("when", "args", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_operator(when: dict[str, Any], args: dict[str, Any], expected: str) -> None:
    assert kind_of(one_rule(when), call("t", **args)) == expected


def test_eq_field_true_when_fields_are_equal() -> None:
    policy = one_rule({"args.environment": {"eq_field": "context.environment"}})
    assert kind_of(policy, call("t", environment="prod"), ctx(environment="prod")) == MATCH


def test_eq_field_false_when_fields_differ() -> None:
    policy = one_rule({"args.environment": {"eq_field": "context.environment"}})
    assert kind_of(policy, call("t", environment="prod"), ctx(environment="dev")) == NO_MATCH


def test_eq_field_other_field_missing_is_error() -> None:
    policy = one_rule({"args.environment": {"eq_field": "context.environment"}})
    assert kind_of(policy, call("t", environment="prod"), ctx()) == ERROR


def test_eq_field_kind_mismatch_is_error() -> None:
    policy = one_rule({"args.n": {"eq_field": "context.limit"}})
    assert kind_of(policy, call("t", n=1), ctx(attrs={"limit": "1"})) == ERROR


def test_ne_field_true_when_fields_differ() -> None:
    policy = one_rule({"args.owner": {"ne_field": "principal.id"}})
    assert kind_of(policy, call("t", owner="bob"), ctx("erin")) == MATCH


def test_ne_field_false_when_fields_are_equal() -> None:
    policy = one_rule({"args.owner": {"ne_field": "principal.id"}})
    assert kind_of(policy, call("t", owner="erin"), ctx("erin")) == NO_MATCH


def test_principal_id_condition() -> None:
    policy = one_rule({"principal.id": "mallory"})
    assert kind_of(policy, call("t"), ctx("mallory")) == MATCH
    assert kind_of(policy, call("t"), ctx("erin")) == NO_MATCH


def test_principal_roles_contains() -> None:
    policy = one_rule({"principal.roles": {"contains": "intern"}})
    assert kind_of(policy, call("t"), ctx("x", ("intern",))) == MATCH
    assert kind_of(policy, call("t"), ctx("x", ("admin",))) == NO_MATCH


def test_context_attr_condition() -> None:
    policy = one_rule({"context.tenant": "acme"})
    assert kind_of(policy, call("t"), ctx(attrs={"tenant": "acme"})) == MATCH


def test_context_nested_attr_condition() -> None:
    policy = one_rule({"context.customer.tier": "gold"})
    assert kind_of(policy, call("t"), ctx(attrs={"customer": {"tier": "gold"}})) == MATCH


def test_context_field_that_is_none_counts_as_missing() -> None:
    policy = one_rule({"context.environment": "prod"})
    assert kind_of(policy, call("t"), ctx()) == ERROR


def test_field_lookup_never_reads_attributes() -> None:
    # `args.__class__` is a key lookup; an args dict without that key is simply missing.
    policy = one_rule({"args.__class__": {"exists": True}})
    assert kind_of(policy, call("t", x=1)) == NO_MATCH


def test_evaluation_error_reason_names_rule_and_field() -> None:
    verdict = one_rule({"args.amount": {"gt": 10}}).evaluate(call("t"), ctx())
    assert verdict.rule == "defaults.on_error"
    assert verdict.reason == "policy could not be evaluated (r): missing args.amount"


def test_type_mismatch_reason_names_the_kinds() -> None:
    verdict = one_rule({"args.amount": {"gt": 10}}).evaluate(call("t", amount="5"), ctx())
    assert verdict.reason is not None
    assert "args.amount is str" in verdict.reason and "number" in verdict.reason
    assert verdict.errors == (verdict.reason,)
