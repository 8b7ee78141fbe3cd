"""Every load-time error names the YAML path and line, and says what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from signoff.model import PolicyError, PolicyErrors
from signoff.policy import Policy
from tests.policy.helpers import load_error, messages

TRANSFER = """\
version: 1
tools:
  transfer_funds:
    rules:
      - id: large-transfer
        when: {FIELD: OPERAND}
        decision: require_approval
"""


def rule_error(operand: str, field: str = "args.amount") -> PolicyError:
    """The error for a one-rule policy whose ``when`` is ``{field: operand}`` (line 6)."""
    return load_error(TRANSFER.replace("FIELD", field).replace("OPERAND", operand))


def test_unknown_operator_error_names_path_and_line() -> None:
    err = rule_error("{gt_: 10000}")
    assert err.path == "signoff.yaml.tools.transfer_funds.rules[0].when.args.amount"
    assert err.line == 6
    assert "unknown operator 'gt_'; known: eq, ne, gt" in err.message


def test_error_string_has_path_line_and_message() -> None:
    assert str(rule_error("{gt_: 10000}")).startswith(
        "signoff.yaml.tools.transfer_funds.rules[0].when.args.amount (line 6): unknown operator"
    )


def test_bad_operand_error_names_operator_path() -> None:
    err = rule_error("{gt: null}")
    assert err.path.endswith("when.args.amount.gt")
    assert err.line == 6
    assert "gt needs a number or a string, got None" in err.message


def test_list_as_eq_value_suggests_in() -> None:
    assert "use {in: [...]}" in rule_error("[1, 2]").message


def test_date_operand_asks_to_quote_it() -> None:
    assert "quote" in rule_error("{eq: 2026-01-01}").message


def test_bad_regex_error() -> None:
    err = rule_error("{matches: '('}")
    assert err.path.endswith("when.args.amount.matches")
    assert err.line == 6
    assert "bad regular expression '('" in err.message


def test_unknown_field_root_error() -> None:
    err = rule_error("1", field="command")
    assert err.path.endswith("rules[0].when.command")
    assert "unknown field 'command'" in err.message


def test_principal_field_other_than_id_or_roles_is_an_error() -> None:
    assert "the principal has only id and roles" in rule_error("x", "principal.email").message


def test_roles_only_take_contains_or_exists() -> None:
    assert "contains: ROLE" in rule_error("admin", "principal.roles").message


def test_unknown_key_in_rule_lists_allowed_keys_and_suggests() -> None:
    err = load_error(
        "version: 1\ntools:\n  t:\n    rules:\n      - id: r\n        decison: allow\n"
    )
    found = next(m for m in messages(err) if "decison" in m)
    assert "signoff.yaml.tools.t.rules[0].decison (line 6)" in found
    assert "unknown key(s) ['decison']; did you mean 'decision'? allowed: [" in found


def test_bad_top_level_key_lists_allowed_keys() -> None:
    err = load_error("version: 1\npolicies: {}\n")
    assert (err.path, err.line) == ("signoff.yaml.policies", 2)
    assert "unknown top-level key(s) ['policies']" in err.message
    assert "'tools'" in err.message and "'serve'" in err.message


def test_version_other_than_1_is_an_error() -> None:
    err = load_error("version: 2\n")
    assert (err.path, err.line) == ("signoff.yaml.version", 1)
    assert "version must be 1" in err.message


def test_missing_version_is_an_error() -> None:
    assert "missing `version: 1`" in load_error("tools: {}\n").message


def test_empty_file_is_an_error() -> None:
    assert "empty" in load_error("").message


def test_yaml_syntax_error_names_file_and_line() -> None:
    err = load_error("version: 1\ntools:\n  execute: {default: allow\n")
    assert err.path == "signoff.yaml"
    assert err.line is not None and err.line >= 3
    assert "YAML syntax error" in err.message
    assert "starts on line 3" in err.message


def test_duplicate_yaml_key_is_an_error() -> None:
    err = load_error("version: 1\ntools:\n  a: {default: allow}\n  a: {default: deny}\n")
    assert (err.path, err.line) == ("signoff.yaml.tools.a", 4)
    assert "duplicate key 'a'" in err.message


def test_bad_duration_error() -> None:
    err = load_error("version: 1\ndefaults:\n  timeout: 15 minutes\n")
    assert (err.path, err.line) == ("signoff.yaml.defaults.timeout", 3)
    assert err.message == "a duration is seconds or like 30s, 15m, 4h, 1d; got '15 minutes'"


def test_bad_template_placeholder_error() -> None:
    err = load_error('version: 1\ntools:\n  t:\n    description: "hi {x}"\n')
    assert (err.path, err.line) == ("signoff.yaml.tools.t.description", 4)
    assert "bad placeholder '{x}'" in err.message


def test_duplicate_rule_id_error_points_at_both() -> None:
    err = load_error(
        "version: 1\ntools:\n"
        "  a:\n    rules:\n      - {id: r, decision: allow}\n"
        "  b:\n    rules:\n      - {id: r, decision: allow}\n"
    )
    assert (err.path, err.line) == ("signoff.yaml.tools.b.rules[0].id", 8)
    assert "duplicate rule id 'r' (first used at signoff.yaml.tools.a.rules[0], line 5)" in (
        err.message
    )


def test_missing_rule_id_error() -> None:
    err = load_error("version: 1\ntools:\n  t:\n    rules:\n      - {decision: allow}\n")
    assert (err.path, err.line) == ("signoff.yaml.tools.t.rules[0]", 5)
    assert "a rule needs an `id`" in err.message


def test_boolean_rule_id_explains_yaml_booleans() -> None:
    err = load_error("version: 1\ntools:\n  t:\n    rules:\n      - {id: no, decision: allow}\n")
    assert "quote it" in err.message


def test_rule_id_may_not_look_built_in() -> None:
    err = load_error(
        "version: 1\ntools:\n  t:\n    rules:\n      - {id: t.default, decision: allow}\n"
    )
    assert "built-in" in err.message


def test_edit_without_editable_args_error() -> None:
    err = load_error(
        "version: 1\ntools:\n  t:\n    default: require_approval\n"
        "    allowed_decisions: [approve, edit]\n"
    )
    assert (err.path, err.line) == ("signoff.yaml.tools.t.allowed_decisions", 5)
    assert "`edit` but no `editable_args`" in err.message


def test_escalate_without_escalate_to_error() -> None:
    err = load_error(
        "version: 1\ntools:\n  t:\n    default: require_approval\n    on_timeout: escalate\n"
    )
    assert (err.path, err.line) == ("signoff.yaml.tools.t.on_timeout", 5)
    assert "on_timeout: escalate needs escalate_to" in err.message


def test_escalate_after_must_be_shorter_than_timeout() -> None:
    err = load_error(
        "version: 1\ntools:\n  t:\n    default: require_approval\n    timeout: 1h\n"
        "    on_timeout: escalate\n    escalate_to: {roles: [admin]}\n    escalate_after: 2h\n"
    )
    assert err.path == "signoff.yaml.tools.t.escalate_after"
    assert "escalate_after (2h) must be shorter than timeout (1h)" in err.message


def test_escalate_to_without_escalate_is_an_error() -> None:
    err = load_error(
        "version: 1\ntools:\n  t:\n    default: require_approval\n"
        "    escalate_to: {roles: [admin]}\n"
    )
    assert "escalate_to only applies with on_timeout: escalate" in err.message


def test_on_error_cannot_be_allow() -> None:
    err = load_error("version: 1\ndefaults:\n  on_error: allow\n")
    assert (err.path, err.line) == ("signoff.yaml.defaults.on_error", 3)
    assert "on_error can never be allow" in err.message


def test_on_error_mapping_cannot_be_allow_either() -> None:
    err = load_error("version: 1\ndefaults:\n  on_error: {decision: allow}\n")
    assert "on_error can never be allow" in err.message


def test_deny_rule_needs_reason() -> None:
    err = load_error("version: 1\ntools:\n  t:\n    rules:\n      - {id: r, decision: deny}\n")
    assert "a deny rule needs `reason`" in err.message


def test_approval_fields_on_allow_rule_are_an_error() -> None:
    err = load_error(
        "version: 1\ntools:\n  t:\n    rules:\n"
        "      - {id: r, decision: allow, approvers: {roles: [x]}}\n"
    )
    assert "approvers only applies to require_approval, not to allow" in err.message


def test_unknown_decision_value_error() -> None:
    err = load_error("version: 1\ntools:\n  t:\n    default: maybe\n")
    assert err.path == "signoff.yaml.tools.t.default.decision"
    assert "decision must be one of ['allow', 'deny', 'require_approval'], got 'maybe'" in (
        err.message
    )


def test_when_cel_is_reserved() -> None:
    err = load_error(
        "version: 1\ntools:\n  t:\n    rules:\n      - id: r\n        decision: allow\n"
        "        when_cel: args.amount > 1\n"
    )
    assert (err.path, err.line) == ("signoff.yaml.tools.t.rules[0].when_cel", 7)
    assert "not supported in version 1 (reserved for the optional CEL extension)" in err.message


def test_quorum_larger_than_listed_users_is_an_error() -> None:
    err = load_error(
        "version: 1\ntools:\n  t:\n    default: require_approval\n"
        "    approvers: {users: [alice], quorum: 2}\n"
    )
    assert err.path == "signoff.yaml.tools.t.approvers"
    assert "quorum 2 cannot be met by 1 listed user(s)" in err.message


def test_quorum_zero_is_an_error() -> None:
    err = load_error(
        "version: 1\ntools:\n  t:\n    default: require_approval\n"
        "    approvers: {roles: [x], quorum: 0}\n"
    )
    assert "quorum needs an integer >= 1, got 0" in err.message


def test_approvers_must_name_someone() -> None:
    err = load_error(
        "version: 1\ntools:\n  t:\n    default: require_approval\n    approvers: {quorum: 1}\n"
    )
    assert "name who approves" in err.message


def test_any_with_roles_is_an_error() -> None:
    err = load_error(
        "version: 1\ntools:\n  t:\n    default: require_approval\n"
        "    approvers: {any: true, roles: [x]}\n"
    )
    assert "any: true admits every person" in err.message


def test_unknown_notify_channel_is_an_error() -> None:
    err = load_error("version: 1\ndefaults:\n  notify: [slack, pager]\n")
    assert "unknown channel(s) ['pager']" in err.message


def test_unknown_decision_type_in_allowed_decisions() -> None:
    err = load_error("version: 1\ndefaults:\n  allowed_decisions: [approve, maybe]\n")
    assert "unknown decision(s) ['maybe']" in err.message


def test_unknown_risk_level_is_an_error() -> None:
    err = load_error("version: 1\ntools:\n  t: {default: allow, risk: extreme}\n")
    assert "risk must be one of ['low', 'medium', 'high', 'critical']" in err.message


def test_bad_time_zone_is_an_error() -> None:
    err = rule_error("{hours_between: [9, 17], tz: Mars/Base}", field="context.time")
    assert err.path.endswith("when.context.time.tz")
    assert "unknown time zone 'Mars/Base'" in err.message


def test_empty_hours_window_is_an_error() -> None:
    err = rule_error("{hours_between: [9, 9]}", field="context.time")
    assert "the window is empty" in err.message


def test_tz_alone_is_an_error() -> None:
    err = rule_error("{tz: UTC}", field="context.time")
    assert "tz only applies with hours_between or weekday_in" in err.message


def test_bad_weekday_is_an_error() -> None:
    err = rule_error("{weekday_in: [funday]}", field="context.time")
    assert "'funday' is not a day" in err.message


def test_bad_rate_is_an_error() -> None:
    err = rule_error("{max: 0, per: 1h}", field="rate")
    assert err.path.endswith("when.rate.max")
    assert "rate.max needs an integer >= 1" in err.message


def test_rate_with_bad_window_is_an_error() -> None:
    err = rule_error("{max: 1, per: soon}", field="rate")
    assert err.path.endswith("when.rate.per")
    assert "a duration is seconds" in err.message


def test_empty_any_is_an_error() -> None:
    assert "any needs a non-empty list of conditions" in rule_error("[]", field="any").message


def test_reserved_section_must_be_a_mapping() -> None:
    err = load_error("version: 1\nserve: 8080\n")
    assert (err.path, err.line) == ("signoff.yaml.serve", 2)
    assert "serve is a mapping" in err.message


def test_bad_store_url_is_an_error() -> None:
    err = load_error("version: 1\nstore: mysql://x\n")
    assert err.path == "signoff.yaml.store"
    assert "store is a URL" in err.message


def test_sqlite_url_with_two_slashes_is_an_error() -> None:
    assert "three slashes" in load_error("version: 1\nstore: sqlite://signoff.db\n").message


def test_unknown_person_key_is_an_error() -> None:
    err = load_error("version: 1\npeople:\n  alice: {roles: [a], phone: 123}\n")
    assert err.path == "signoff.yaml.people.alice.phone"
    assert "unknown key(s) ['phone']" in err.message


def test_unsafe_yaml_tag_is_refused() -> None:
    err = load_error("version: 1\ntools: !!python/object:os.system {}\n")
    assert "unsupported YAML tag" in err.message


def test_all_errors_are_reported_in_one_load() -> None:
    err = load_error(
        "version: 1\n"
        "defaults:\n  timeout: soon\n  on_error: allow\n"
        "tools:\n  t:\n    rules:\n      - {decision: allow}\n"
    )
    assert isinstance(err, PolicyErrors)
    assert sorted({e.line for e in err.errors if e.line is not None}) == [3, 4, 8]


def test_mapping_errors_have_paths_but_no_lines() -> None:
    with pytest.raises(PolicyError) as info:
        Policy.from_mapping({"version": 1, "tools": {"t": {"default": "maybe"}}})
    assert info.value.path == "<mapping>.tools.t.default.decision"
    assert info.value.line is None


def test_load_of_missing_file_is_a_policy_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as info:
        Policy.load(tmp_path / "signoff.yaml")
    assert "cannot read the policy file" in info.value.message


def test_load_error_prefix_is_the_file_basename(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text("version: 1\nbogus: 1\n", encoding="utf-8")
    with pytest.raises(PolicyError) as info:
        Policy.load(path)
    assert (info.value.path, info.value.line) == ("team.yaml.bogus", 2)


def test_notify_naming_a_channel_the_file_does_not_configure_is_a_warning() -> None:
    text = (
        "version: 1\n"
        "channels:\n  email: {host: localhost, sender: a@example.com}\n"
        "tools:\n  pay:\n    default: require_approval\n    approvers: {any: true}\n"
        "    notify: [slack, email, web]\n"
    )
    policy = Policy.from_yaml(text)
    [warning] = [w for w in policy.warnings if "notify" in w]
    assert "(line 8)" in warning
    assert "notify names ['slack']" in warning and "nothing is sent there" in warning


def test_notify_without_a_channels_section_is_not_warned_about() -> None:
    """Channels may come from Gate(channels=...): a file without `channels:` is not judged."""
    text = "version: 1\ntools:\n  pay: {default: require_approval, notify: [slack]}\n"
    assert not [w for w in Policy.from_yaml(text).warnings if "notify" in w]
