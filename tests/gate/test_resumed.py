"""``gate/resumed.py`` on its own: the gate a framework adapter may use, the context it fills
in, and running a resumed call only as the store allows."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from signoff import Gate, Policy, ToolCall
from signoff.gate.resumed import Ran, Refused, ambient_context, ask, local_gate, run_resumed
from signoff.model import SignoffError
from tests.gate.snapshots import SnapshotCheckingStore

POLICY = """
version: 1
people:
  alice: {roles: [ops]}
tools:
  read: {default: allow}
  drop: {default: deny}
  delete:
    default: require_approval
    approvers: {roles: [ops]}
    allowed_decisions: [approve, edit, reject]
    editable_args: "*"
"""


@pytest.fixture
def gate() -> Any:
    g = Gate(Policy.from_yaml(textwrap.dedent(POLICY)), SnapshotCheckingStore())
    yield g
    g.close()


def recorder(ran: list[Mapping[str, Any]]) -> Any:
    async def run(args: Mapping[str, Any]) -> str:
        ran.append(dict(args))
        return "ok"

    return run


def test_local_gate_takes_a_gate_or_a_policy_path(gate: Gate, tmp_path: Path) -> None:
    assert local_gate(gate, "x") is gate
    path = tmp_path / "signoff.yaml"
    path.write_text(textwrap.dedent(POLICY) + "store: memory://\n", encoding="utf-8")
    built = local_gate(path, "x")
    assert isinstance(built, Gate)
    built.close()


def test_local_gate_refuses_anything_else_naming_the_caller() -> None:
    with pytest.raises(SignoffError, match="my_adapter needs a local signoff Gate"):
        local_gate(object(), "my_adapter")


def test_ambient_context_fills_in_only_what_is_unset(gate: Gate) -> None:
    assert ambient_context("conv-1", "bot").thread == "conv-1"
    assert ambient_context("conv-1", "bot").agent == "bot"
    with gate.context("erin", thread="mine", agent="a1"):
        ctx = ambient_context("conv-1", "bot")
    assert (ctx.thread, ctx.agent, ctx.principal.id) == ("mine", "a1", "erin")


async def test_allowed_and_denied_calls_unknown_to_the_store(gate: Gate) -> None:
    ran: list[Mapping[str, Any]] = []
    ctx = gate.make_context("erin", thread="t")
    allowed = await run_resumed(
        gate, ToolCall("read", {"p": 1}, id="c1"), ctx, recorder(ran), wait=False
    )
    denied = await run_resumed(gate, ToolCall("drop", {}, id="c2"), ctx, recorder(ran), wait=False)
    assert allowed == Ran("ok") and ran == [{"p": 1}]
    assert isinstance(denied, Refused) and "denied by policy rule" in denied.text


async def test_a_call_needing_a_human_without_a_request_is_refused(gate: Gate) -> None:
    ran: list[Mapping[str, Any]] = []
    ctx = gate.make_context("erin", thread="t")
    out = await run_resumed(
        gate, ToolCall("delete", {"p": 1}, id="c1"), ctx, recorder(ran), wait=False
    )
    assert isinstance(out, Refused) and "no approval request" in out.text
    assert ran == [] and not await gate.alist()


async def test_an_edited_call_runs_the_edit_once(gate: Gate) -> None:
    ran: list[Mapping[str, Any]] = []
    ctx = gate.make_context("erin", thread="t")
    call = ToolCall("delete", {"p": 1}, id="c1")
    verdict, req = await ask(gate, call, ctx)
    assert verdict.needs_approval and req is not None
    edit = {"type": "edit", "edited_action": {"name": "delete", "args": {"p": 2}}}
    await gate.adecide(req.id, [edit], approver="alice")
    first = await run_resumed(gate, call, ctx, recorder(ran), wait=False)
    again = await run_resumed(gate, call, ctx, recorder(ran), wait=False)
    assert first == Ran("ok", {"p": 2}) and ran == [{"p": 2}]
    assert isinstance(again, Refused) and "already run" in again.text
