"""Property tests: evaluation never raises; loading garbage gives PolicyError or a Policy."""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from signoff.model import CallContext, PolicyError, ToolCall
from signoff.policy import Policy
from tests.policy.helpers import EXAMPLES, FRIDAY_10_UTC

EXAMPLE = Policy.load(EXAMPLES / "signoff.yaml")

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
arg_names = st.sampled_from(["amount", "table", "record_id", "environment", "command", "to", "x"])
tool_names = st.one_of(
    st.sampled_from(
        ["delete_record", "transfer_funds", "execute", "sell_stock", "read_file", "get_stock_price"]
    ),
    st.text(max_size=12),
)


@given(
    tool=tool_names,
    args=st.dictionaries(arg_names, json_values, max_size=5),
    attrs=st.dictionaries(st.text(max_size=6), json_values, max_size=3),
    environment=st.one_of(st.none(), st.text(max_size=8)),
    risk=st.sampled_from([None, "low", "high", "critical", "bogus"]),
)
@settings(max_examples=300, deadline=None)
def test_random_calls_never_make_evaluate_raise(
    tool: str,
    args: dict[str, Any],
    attrs: dict[str, Any],
    environment: str | None,
    risk: Any,
) -> None:
    ctx = CallContext(
        principal=EXAMPLE.principal("erin"),
        environment=environment,
        time=FRIDAY_10_UTC,
        attrs=attrs,
    )
    verdict = EXAMPLE.evaluate(ToolCall(tool, args), ctx, risk=risk)
    assert verdict.kind in ("allow", "deny", "require_approval")
    assert verdict.policy_hash == EXAMPLE.short_hash
    if verdict.rule == "defaults.on_error":
        assert verdict.kind != "allow"


policy_keys = st.sampled_from(
    ["version", "tools", "defaults", "people", "store", "rules", "when", "decision", "id",
     "default", "approvers", "roles", "quorum", "timeout", "args.amount", "gt", "in", "any",
     "not", "rate", "reason", "unknown_tool", "on_error", "serve", "description", "x"]
)  # fmt: skip
garbage = st.recursive(
    st.one_of(scalars, st.sampled_from(["allow", "deny", "require_approval", "1h", "{tool}"])),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(policy_keys, inner, max_size=4)
    ),
    max_leaves=20,
)


@given(data=st.one_of(garbage, st.dictionaries(policy_keys, garbage, max_size=5)))
@settings(max_examples=400, deadline=None)
def test_garbage_mappings_give_policy_error_or_a_policy(data: Any) -> None:
    try:
        policy = Policy.from_mapping(data)
    except PolicyError:
        return
    verdict = policy.evaluate(ToolCall("x", {}), CallContext(time=FRIDAY_10_UTC))
    assert verdict.kind in ("allow", "deny", "require_approval")


@given(text=st.text(max_size=200))
@settings(max_examples=300, deadline=None)
def test_garbage_yaml_text_gives_policy_error_or_a_policy(text: str) -> None:
    with contextlib.suppress(PolicyError):
        Policy.from_yaml(text)


operators = st.sampled_from(
    ["eq", "ne", "gt", "gte", "lt", "lte", "in", "not_in", "contains", "first_word_in",
     "starts_with", "ends_with", "glob", "matches", "not_matches", "exists", "eq_field",
     "hours_between", "weekday_in", "tz", "bogus"]
)  # fmt: skip
fields = st.sampled_from(
    ["args.amount", "args.a.b", "tool", "principal.id", "principal.roles", "context.time",
     "context.environment", "nope"]
)  # fmt: skip
conditions = st.dictionaries(
    fields, st.one_of(scalars, st.dictionaries(operators, json_values, max_size=2)), max_size=3
)
rules = st.fixed_dictionaries(
    {
        "id": st.text(min_size=1, max_size=6),
        "decision": st.sampled_from(["allow", "deny", "require_approval", "maybe"]),
    },
    optional={"when": conditions, "reason": st.text(max_size=5), "timeout": json_values},
)


@given(
    tool_rules=st.lists(rules, max_size=4),
    args=st.dictionaries(st.sampled_from(["amount", "a"]), json_values, max_size=2),
)
@settings(max_examples=400, deadline=None)
def test_random_rules_load_cleanly_or_fail_with_policy_error(
    tool_rules: list[dict[str, Any]], args: dict[str, Any]
) -> None:
    data = {"version": 1, "tools": {"t": {"default": "allow", "rules": tool_rules}}}
    try:
        policy = Policy.from_mapping(data)
    except PolicyError:
        return
    ctx = CallContext(environment="prod", time=FRIDAY_10_UTC)
    verdict = policy.evaluate(ToolCall("t", args), ctx)
    assert verdict.kind in ("allow", "deny", "require_approval")
    assert policy.explain(ToolCall("t", args), ctx).verdict == verdict
