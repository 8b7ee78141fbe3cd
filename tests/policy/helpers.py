"""Small builders shared by the policy tests."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from signoff.model import CallContext, PolicyError, Principal, ToolCall
from signoff.policy import Policy

#: The repository's ``examples/`` directory (the shipped example policy and cases).
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

#: A Friday, 10:00 UTC.
FRIDAY_10_UTC = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)


def load(text: str, **kwargs: Any) -> Policy:
    """A policy from indented YAML text (``version: 1`` is added when absent)."""
    body = textwrap.dedent(text).strip("\n")
    if not body.startswith("version:"):
        body = "version: 1\n" + body
    return Policy.from_yaml(body + "\n", **kwargs)


def load_error(text: str) -> PolicyError:
    """The PolicyError loading ``text`` raises (fails the test if it loads)."""
    with pytest.raises(PolicyError) as info:
        Policy.from_yaml(textwrap.dedent(text).strip("\n") + "\n")
    return info.value


def messages(err: PolicyError) -> list[str]:
    """Every individual message of a PolicyError or PolicyErrors."""
    return [str(e) for e in getattr(err, "errors", [err])]


def call(tool: str, **args: Any) -> ToolCall:
    return ToolCall(tool, args, id="call-1")


def ctx(
    principal: str = "erin",
    roles: tuple[str, ...] = (),
    *,
    time: datetime = FRIDAY_10_UTC,
    **fields: Any,
) -> CallContext:
    attrs = fields.pop("attrs", {})
    return CallContext(
        principal=Principal(principal, frozenset(roles)), time=time, attrs=attrs, **fields
    )


def one_rule(when: dict[str, Any], decision: str = "deny", **extra: Any) -> Policy:
    """Tool ``t`` (default allow) with one rule ``r`` over ``when``; deny unless told."""
    rule: dict[str, Any] = {"id": "r", "when": when, "decision": decision, **extra}
    if decision == "deny":
        rule.setdefault("reason", "matched")
    return Policy.from_mapping(
        {"version": 1, "tools": {"t": {"default": "allow", "rules": [rule]}}}
    )


def kind_of(policy: Policy, tool_call: ToolCall, context: CallContext | None = None) -> str:
    """The verdict kind, or ``error`` when the on_error verdict came back."""
    verdict = policy.evaluate(tool_call, context or ctx())
    return "error" if verdict.rule == "defaults.on_error" else verdict.kind
