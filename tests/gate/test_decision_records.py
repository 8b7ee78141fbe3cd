"""Decision records are made without validating them again only when validation would change
nothing: the record is the validated one, field for field."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from signoff import CallContext, Gate, Policy, ToolCall
from signoff.gate import decisions
from signoff.model import Decision, Principal
from signoff.store import MemoryStore
from tests.gate.test_build_request import POLICY
from tests.model.test_built import same_model

CTX = CallContext(principal=Principal(id="agent-user"), thread="t1")


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate(Policy.from_yaml(textwrap.dedent(POLICY)), MemoryStore())
    yield g
    g.close()


def _records(gate: Gate, given: list[Any], approver: Any = "alice") -> tuple[Any, Any]:
    sub = gate.submit([ToolCall(name="editable", args={"amount": 5}, id="c1")], CTX)
    assert sub.request is not None
    fast = decisions.checked_decisions(gate, sub.request, given, approver=approver, channel="api")
    with pytest.MonkeyPatch.context() as m:
        m.setattr(decisions, "built", lambda cls, values: cls(**values))
        slow = decisions.checked_decisions(
            gate, sub.request, given, approver=approver, channel="api"
        )
    return fast.records, slow.records


@pytest.mark.parametrize(
    "given",
    [
        [{"type": "approve"}],
        [{"type": "approve", "message": "fine", "tool_call_id": "c1"}],
        [{"type": "reject", "message": "no"}],
        [{"type": "edit", "edited_action": {"name": "editable", "args": {"amount": 3}}}],
        [{"type": "approve", "scope": "thread"}],
        [{"type": "approve", "scope": {"kind": "agent", "for": "1h"}}],
        [Decision(type="approve", message="as an object")],
    ],
)
def test_decision_record_unvalidated_is_the_validated_record(
    gate: Gate,
    given: list[Any],
) -> None:
    fast, slow = _records(gate, given)
    assert len(fast) == len(slow) == 1
    assert decisions._plain_record(decisions.parse_decisions(given)[0], "c1", "alice", "api"), (
        "the plain path is the one under test"
    )
    same_model(fast[0], slow[0].model_copy(update={"at": fast[0].at, "grant_id": fast[0].grant_id}))


class Name(str):
    """A str subclass: validation makes it a plain str, so the record takes that path."""


def test_an_approver_name_validation_would_convert_is_validated(gate: Gate) -> None:
    fast, slow = _records(gate, [{"type": "approve"}], approver=Name("alice"))
    assert type(fast[0].approver) is str
    same_model(fast[0], slow[0].model_copy(update={"at": fast[0].at}))
