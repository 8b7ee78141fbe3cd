"""Limits at the door: input that could break signoff, or be shown differently from what runs,
is refused before any check, store or surface sees it (issue: hardening I)."""

from __future__ import annotations

import dataclasses
import enum
import math
import textwrap
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from signoff import CallContext, Denied, Gate, Policy, ToolCall
from signoff.assemble import check_sections
from signoff.checks.limits import Limits, canonical_size, check_args, check_json, clip_text
from signoff.model import InvalidInput, Principal
from signoff.store import AuditQuery
from tests.gate.conftest import make_policy
from tests.gate.snapshots import SnapshotCheckingStore


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"k": value}
    return value


def audit(gate: Gate) -> list[Any]:
    gate.start()
    gate._portal.run(gate.store.flush_audit())
    return list(gate._portal.run(gate.store.read_audit(AuditQuery(limit=1000))))


@pytest.fixture
def gate() -> Any:
    g = Gate(make_policy(), SnapshotCheckingStore())
    yield g
    g.close()


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"amount": float("nan"), "to": "acme"}, "args.amount"),
        ({"amount": float("inf"), "to": "acme"}, "args.amount"),
        ({"amount": -math.inf, "to": "acme"}, "args.amount"),
        ({"amount": 2**53, "to": "acme"}, "args.amount"),
        ({"amount": 10**5000, "to": "acme"}, "args.amount"),
        ({"amount": 5, "to": nested(40)}, "args.to"),
        ({"amount": 5, "to": "x" * 300_000}, "args"),
        ({"amount": 5, "to": {1: "non-string key"}}, "args.to"),
        ({"amount": 5, "to": object()}, "args.to"),
    ],
)
def test_unfaithful_or_oversized_arguments_are_denied_by_rule_limits(
    gate: Gate, args: dict[str, Any], field: str
) -> None:
    verdict = gate.check(ToolCall("transfer_funds", args))
    assert verdict.denied and verdict.rule == "limits"
    assert field in (verdict.reason or "")


def test_nan_no_longer_slips_past_a_numeric_rule(gate: Gate) -> None:
    # Before: NaN compared false to every bound, so `gt: 1000000` missed and the call ran.
    @gate.guard
    def transfer_funds(amount: float, to: str) -> str:
        return "sent"

    with pytest.raises(Denied) as err:
        transfer_funds(float("nan"), "acme")
    assert err.value.verdict.rule == "limits"
    assert transfer_funds(5.0, "acme") == "sent"


def test_a_refused_call_is_audited_as_denied_and_nothing_is_stored(gate: Gate) -> None:
    @gate.guard
    def execute(command: str, env: Any = None) -> str:
        raise AssertionError("must not run")

    with pytest.raises(Denied):
        execute("ls", env=nested(250))
    events = audit(gate)
    assert [(e.event, e.rule) for e in events] == [("denied", "limits")]
    assert gate._portal.run(gate.alist()) == []


def test_deep_context_attrs_are_refused_like_arguments(gate: Gate) -> None:
    ctx = CallContext(principal=Principal("erin"), attrs={"deep": nested(250)})
    verdict = gate.check(ToolCall("execute", {"command": "rm -rf /"}), ctx)
    assert verdict.denied and verdict.rule == "limits"
    assert "context.attrs.deep" in (verdict.reason or "")


class Colour(enum.Enum):
    RED = "red"


class Address(BaseModel):
    street: str
    zip: str


@dataclasses.dataclass
class Window:
    start: int
    end: int


def test_python_values_the_signature_round_trips_are_kept_and_run_as_given() -> None:
    gate = Gate(
        make_policy("version: 1\ndefaults: {unknown_tool: allow}\n"), SnapshotCheckingStore()
    )
    seen: list[tuple[Any, ...]] = []

    @gate.guard
    def ship(
        when: datetime,
        price: Decimal,
        path: Path,
        colour: Colour,
        to: Address,
        window: Window,
        tags: set[str],
        blob: bytes,
    ) -> str:
        seen.append((when, price, path, colour, to, window, tags, blob))
        return "ok"

    args = (
        datetime(2026, 11, 24, 12, 0, tzinfo=UTC),
        Decimal("10.50"),
        Path("/tmp/x"),
        Colour.RED,
        Address(street="Main", zip="123"),
        Window(1, 2),
        {"a", "b"},
        b"raw",
    )
    try:
        assert ship(*args) == "ok"
    finally:
        gate.close()
    assert seen == [args]
    assert type(seen[0][1]) is Decimal and type(seen[0][4]) is Address


def test_python_values_without_a_faithful_form_are_refused() -> None:
    gate = Gate(
        make_policy("version: 1\ndefaults: {unknown_tool: allow}\n"), SnapshotCheckingStore()
    )

    class Opaque:
        pass

    @gate.guard
    def store_it(value: Any) -> str:
        return "ran"

    try:
        for bad in (Opaque(), {1, 2}, b"bytes typed Any", float("nan")):
            with pytest.raises(Denied) as err:
                store_it(bad)
            assert err.value.verdict.rule == "limits", bad
            assert "args.value" in str(err.value.verdict.reason)
        assert store_it({"plain": ["json", 1, 2.5, None, True]}) == "ran"
    finally:
        gate.close()


def test_more_calls_in_one_step_than_the_limit_is_refused_before_anything_is_stored() -> None:
    policy = Policy.from_yaml("version: 1\nlimits: {max_calls_per_request: 3}\n")
    gate = Gate(policy, SnapshotCheckingStore())
    try:
        calls = [ToolCall("anything", {"i": i}) for i in range(4)]
        with pytest.raises(InvalidInput) as err:
            gate.submit(calls)
        assert err.value.field == "tool_calls"
        assert gate._portal.run(gate.alist()) == []
        assert gate.submit(calls[:3]).request is not None
    finally:
        gate.close()


def test_long_context_text_is_kept_cut_with_a_marker_and_the_cut_is_audited(gate: Gate) -> None:
    ctx = CallContext(principal=Principal("erin"), user_request="u" * 9000, reasoning="why " * 10)
    sub = gate.submit([ToolCall("execute", {"command": "rm -rf /tmp/x"})], ctx)
    assert sub.request is not None
    assert sub.request.user_request == "u" * 8192 + "… [truncated 808 chars]"
    assert sub.request.reasoning == "why " * 10
    created = [e for e in audit(gate) if e.event == "created"]
    assert created[0].data["truncated_chars"] == {"user_request": 808}


def test_limits_section_is_validated_and_used() -> None:
    bad = Policy.from_yaml("version: 1\nlimits: {max_json_depth: 0, bogus: 1}\n")
    errors, _ = check_sections(bad)
    assert errors and "limits." in errors[0]
    policy = Policy.from_yaml(
        textwrap.dedent(
            """
            version: 1
            defaults: {unknown_tool: allow}
            limits: {max_json_depth: 3, max_args_bytes: 100}
            """
        )
    )
    gate = Gate(policy, SnapshotCheckingStore())
    try:
        # the arguments object itself is level 1
        assert gate.check(ToolCall("t", {"a": {"b": {"c": 1}}})).allowed
        assert gate.check(ToolCall("t", {"a": {"b": {"c": [1]}}})).rule == "limits"
        assert gate.check(ToolCall("t", {"a": "x" * 200})).rule == "limits"
    finally:
        gate.close()


def test_size_is_the_canonical_json_bytes() -> None:
    limits = Limits(max_args_bytes=64)
    value = {"é": "ü" * 20}  # 2 bytes a character in UTF-8
    assert canonical_size(value) == len(('{"é":"' + "ü" * 20 + '"}').encode())
    check_json(value, limits, "args")
    with pytest.raises(InvalidInput):
        check_json({"é": "ü" * 40}, limits, "args")


def test_deep_input_never_hits_the_recursion_limit() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(InvalidInput) as err:
        check_args({"x": deep}, Limits())
    assert "max_json_depth" in err.value.message


def test_clip_text_leaves_short_text_alone() -> None:
    assert clip_text("short", Limits()) == ("short", 0)
    assert clip_text(None, Limits()) == (None, 0)
