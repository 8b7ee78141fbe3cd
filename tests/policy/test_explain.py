"""``Policy.explain``: the matched entry, each rule tried, and the final verdict."""

from __future__ import annotations

import json

from signoff.policy import Policy
from tests.policy.helpers import call, ctx, load

POLICY = """
tools:
  delete_record:
    default: allow
    rules:
      - id: protect
        when: {args.table: users, args.id: 1}
        decision: deny
        reason: protected
      - id: prod
        when: {args.env: prod}
        decision: require_approval
        approvers: {roles: [dba]}
      - id: tmp
        when: {args.table: tmp}
        decision: allow
  "read_*": {default: allow}
"""


def policy() -> Policy:
    return load(POLICY)


def test_explain_lists_rules_in_evaluation_order_with_outcomes() -> None:
    trace = policy().explain(call("delete_record", table="orders", id=2, env="prod"), ctx())
    assert trace.lookup == "exact" and trace.entry == "delete_record"
    outcomes = [(s.rule, s.outcome) for s in trace.steps]
    assert outcomes == [("protect", "no match"), ("prod", "matched"), ("tmp", "not evaluated")]
    assert trace.final_rule == "prod"


def test_explain_steps_point_at_the_file() -> None:
    trace = policy().explain(call("delete_record", table="x", id=2, env="dev"), ctx())
    assert trace.steps[0].path == "signoff.yaml.tools.delete_record.rules[0]"
    assert trace.steps[0].line == 6
    assert trace.entry_line == 3


def test_explain_reports_errors_and_stops() -> None:
    trace = policy().explain(call("delete_record", table="users"), ctx())
    assert trace.steps[0].outcome == "error"
    assert trace.steps[0].error == "missing args.id"
    assert [s.outcome for s in trace.steps[1:]] == ["not evaluated", "not evaluated"]
    assert trace.final_rule == "defaults.on_error"


def test_explain_glob_lookup() -> None:
    trace = policy().explain(call("read_file"), ctx())
    assert (trace.lookup, trace.entry, trace.final_rule) == ("glob", "read_*", "read_*.default")


def test_explain_unknown_tool() -> None:
    trace = policy().explain(call("send_email"), ctx())
    assert (trace.lookup, trace.entry, trace.steps) == ("unknown", None, [])
    assert trace.final_rule == "defaults.unknown_tool"


def test_explain_verdict_equals_evaluate() -> None:
    p = policy()
    for c in [call("delete_record", table="users", id=1), call("read_x"), call("zzz")]:
        assert p.explain(c, ctx()).verdict == p.evaluate(c, ctx())


def test_explain_to_dict_is_json_ready() -> None:
    data = policy().explain(call("delete_record", table="orders", id=2, env="prod"), ctx())
    encoded = json.loads(json.dumps(data.to_dict()))
    assert encoded["final_rule"] == "prod"
    assert encoded["verdict"]["review"]["approvers"] == {"roles": ["dba"], "users": [], "quorum": 1}
    assert encoded["steps"][1]["outcome"] == "matched"
