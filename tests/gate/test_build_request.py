"""build_request makes the request without validating it again only when validation would
change nothing: the result is the validated request, field for field, whatever the path."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from signoff import CallContext, Gate, Policy, ToolCall
from signoff.gate import submission
from signoff.model import Principal, ReviewConfig, ReviewSpec, Verdict, requests
from signoff.model.verdicts import Approvers
from signoff.store import MemoryStore
from tests.model.test_built import same_model

POLICY = """
version: 1
defaults:
  unknown_tool: require_approval
  approvers: {roles: [admin]}
people:
  alice: {roles: [admin, dba]}
tools:
  plain:
    default: require_approval
    description: "Plain {args.table}"
    risk: high
  quorum:
    default: require_approval
    approvers: {roles: [dba], quorum: 2}
    allowed_decisions: [approve, edit, reject]
    editable_args: [amount]
  chained:
    default: require_approval
    approvers:
      stages:
        - {roles: [dba], timeout: 30}
        - {roles: [admin]}
  editable:
    default: require_approval
    allowed_decisions: [approve, edit, reject]
    editable_args: [amount]
  escalating:
    default: require_approval
    timeout: 2
    on_timeout: escalate
    escalate_to: {roles: [admin]}
    escalate_after: 0.5
"""

NOW = datetime(2026, 11, 27, 13, 0, 0, 5, tzinfo=UTC)


class Text(str):
    """A str subclass: validation turns it into a plain str, so it takes that path."""


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    monkeypatch.setattr(submission, "utcnow", lambda: NOW)
    g = Gate(Policy.from_yaml(textwrap.dedent(POLICY)), MemoryStore())
    yield g
    g.close()


def _review(gate: Gate, calls: list[ToolCall], ctx: CallContext) -> list[tuple[ToolCall, Verdict]]:
    return [(c, gate.check(c, ctx)) for c in calls]


def _both(
    gate: Gate, calls: list[ToolCall], ctx: CallContext, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, Any]:
    review = _review(gate, calls, ctx)
    fast = submission.build_request(gate, review, ctx, None, "req_fixed")
    with monkeypatch.context() as m:
        m.setattr(submission, "built", submission._validated)  # every model validated
        m.setattr(requests, "built", submission._validated)  # the review configs too
        slow = submission.build_request(gate, review, ctx, None, "req_fixed")
    return fast, slow


CTX = CallContext(
    principal=Principal(id="agent-user", roles=frozenset({"b", "a"})),
    agent="bot",
    thread="t1",
    environment="prod",
    user_request="clean up",
    reasoning="it is old",
    attrs={"ticket": 7, "tags": ["x"]},
)

STEPS = {
    "plain": [ToolCall(name="plain", args={"table": "t", "n": [1, {"k": None}]}, id="c1")],
    "quorum": [ToolCall(name="quorum", args={"amount": 5.5}, id="c1")],
    "chained": [ToolCall(name="chained", args={}, id="c1")],
    "escalating": [ToolCall(name="escalating", args={"a": 1}, id="c1")],
    "unknown tool": [ToolCall(name="nobody_knows", args={"a": "b"}, id="c1")],
    "several calls": [
        ToolCall(name="plain", args={"table": "t"}, id="c1"),
        ToolCall(name="chained", args={"x": 1}, id="c2"),
        ToolCall(name="quorum", args={"amount": 1}, id="c3"),
    ],
}


@pytest.mark.parametrize("step", list(STEPS))
def test_request_built_unvalidated_is_the_validated_request(
    gate: Gate, step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = STEPS[step]
    assert submission._plain_step(_review(gate, calls, CTX), CTX, "req_fixed")
    fast, slow = _both(gate, calls, CTX, monkeypatch)
    same_model(fast, slow)
    assert fast.to_wire() == slow.to_wire()


@pytest.mark.parametrize(
    ("calls", "ctx"),
    [
        ([ToolCall(name=Text("plain"), args={"table": "t"}, id="c1")], CTX),
        ([ToolCall(name="plain", args={"table": "t"}, id=Text("c1"))], CTX),
        ([ToolCall(name="plain", args={Text("table"): "t"}, id="c1")], CTX),
        ([ToolCall(name="plain", args={}, id="c1")], CallContext(thread=Text("t1"))),
        (
            [ToolCall(name="plain", args={}, id="c1")],
            CallContext(thread="t1", principal=Principal(id="u", roles=frozenset({Text("r")}))),
        ),
    ],
)
def test_anything_validation_would_convert_is_validated(
    gate: Gate, calls: list[ToolCall], ctx: CallContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not submission._plain_step(_review(gate, calls, ctx), ctx, None)
    fast, slow = _both(gate, calls, ctx, monkeypatch)
    same_model(fast, slow)


def test_a_value_of_the_wrong_type_is_still_refused(gate: Gate) -> None:
    ctx = CallContext(thread=42)  # type: ignore[arg-type]
    call = ToolCall(name="plain", args={}, id="c1")
    review = [(call, gate.check(call, CallContext(thread="t")))]
    assert not submission._plain_step(review, ctx, None)
    with pytest.raises(ValidationError, match="thread"):
        submission.build_request(gate, review, ctx, None)


@pytest.mark.parametrize(
    "spec",
    [
        ReviewSpec(),
        ReviewSpec(
            allowed_decisions=("approve", "edit", "reject"),
            editable_args="*",
            notify=("slack", "email"),
            timeout_s=30.0,
            on_timeout="escalate",
            escalate_to=Approvers(roles=("admin",)),
            escalate_after_s=10.0,
            forbid_self_approval=False,
        ),
        ReviewSpec(editable_args=("amount", "memo"), approvers=Approvers(users=("alice",))),
    ],
)
def test_review_config_unvalidated_is_the_validated_config(
    spec: ReviewSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert requests._plain_review(spec, "c1", "tool")
    fast = ReviewConfig.of("c1", "tool", spec)
    monkeypatch.setattr(requests, "built", submission._validated)
    same_model(fast, ReviewConfig.of("c1", "tool", spec))


@pytest.mark.parametrize(
    "spec",
    [
        ReviewSpec(timeout_s=60),  # an int: validation makes it 60.0
        ReviewSpec(escalate_after_s=5, on_timeout="escalate"),
        ReviewSpec(notify=(Text("slack"),)),
        ReviewSpec(editable_args=(Text("amount"),)),
    ],
)
def test_review_values_validation_would_convert_are_validated(spec: ReviewSpec) -> None:
    assert not requests._plain_review(spec, "c1", "tool")
    config = ReviewConfig.of("c1", "tool", spec)
    assert type(config.timeout_s) is float
    assert config.model_dump_json() == ReviewConfig(**dict(config)).model_dump_json()
