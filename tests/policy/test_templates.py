"""Description templates: checked at load, rendered with dict lookups only."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.policy.helpers import call, ctx, load, load_error


def describe(template: str, **args: object) -> str | None:
    policy = load(
        f"""
        tools:
          t:
            default: require_approval
            approvers: {{any: true}}
            description: "{template}"
        """
    )
    return policy.evaluate(call("t", **args), ctx("erin", environment="prod")).description


def test_renders_tool_args_principal_and_context() -> None:
    text = describe("{tool}: {args.n} by {principal.id} in {context.environment}", n=3)
    assert text == "t: 3 by erin in prod"


def test_nested_args_placeholder() -> None:
    assert describe("{args.target.env}", target={"env": "prod"}) == "prod"


def test_missing_value_renders_missing() -> None:
    assert describe("{args.nope} / {context.agent}") == "<missing> / <missing>"


def test_dunder_placeholder_is_only_a_key_lookup() -> None:
    assert describe("{args.__class__}") == "<missing>"


def test_double_braces_are_literal() -> None:
    assert describe("{{literal}} {args.n}", n=1) == "{literal} 1"


def test_time_renders_as_iso_8601() -> None:
    policy = load(
        "tools:\n  t: {default: require_approval, approvers: {any: true},"
        ' description: "{context.time}"}'
    )
    at = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    assert policy.evaluate(call("t"), ctx(time=at)).description == "2026-11-20T10:00:00+00:00"


def test_unclosed_brace_is_a_load_error() -> None:
    err = load_error('version: 1\ntools:\n  t:\n    description: "oops {args.n"\n')
    assert "unclosed '{'" in err.message


def test_format_spec_is_a_load_error() -> None:
    err = load_error('version: 1\ntools:\n  t:\n    description: "{args.n:>10}"\n')
    assert "bad placeholder" in err.message


def test_unmatched_closing_brace_is_a_load_error() -> None:
    err = load_error('version: 1\ntools:\n  t:\n    description: "a } b"\n')
    assert "unmatched '}'" in err.message
