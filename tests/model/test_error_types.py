"""Errors users of LangChain's HITL middleware catch as ``ValueError`` are ``ValueError``s."""

from __future__ import annotations

import pytest

from signoff import Gate, Policy
from signoff.model import DecisionError, NotAuthorized, PolicyError
from signoff.store import MemoryStore


def test_decision_and_policy_errors_are_value_errors() -> None:
    assert issubclass(DecisionError, ValueError)
    assert issubclass(NotAuthorized, ValueError)
    assert issubclass(PolicyError, ValueError)


def test_an_invalid_interrupt_on_is_caught_as_value_error() -> None:
    with pytest.raises(ValueError):
        Gate.from_interrupt_on({"tool": {"allowed_decisions": ["explode"]}})


def test_a_malformed_decision_is_caught_as_value_error() -> None:
    gate = Gate(Policy.from_yaml("version: 1\ndefaults: {unknown_tool: allow}\n"), MemoryStore())
    try:
        with pytest.raises(ValueError):
            gate.decide("req_missing", [{"type": "explode"}], approver="x")
    finally:
        gate.close()
