"""``signoff watch``, the rest of the issue's list: an edit that lands on a stricter rule
(the note saying so, the row and the detail's edit diff, the rule and its reason), the arrow
keys, the deadline counting down live, and ``q``."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Input, Static

from signoff import CallContext, Gate, Policy, Principal, ToolCall
from signoff.cli.deciding import CliGate
from signoff.model import ApprovalRequest
from signoff.tui.dialogs import ConfirmScreen, DetailScreen, EditScreen
from tests.tui.conftest import ask, until
from tests.tui.test_watch_local import make_app, row_text, stored

REROUTE = """
version: 1
store: sqlite:///signoff.db
people:
  bob:   {roles: [finance]}
  carol: {roles: [finance]}
  dave:  {roles: [ops]}
tools:
  transfer_funds:
    default: allow
    allowed_decisions: [approve, edit, reject]
    editable_args: [amount]
    rules:
      - id: large-transfer
        when: {args.amount: {gt: 100000}}
        decision: require_approval
        approvers: {roles: [finance], quorum: 2}
        reason: large transfers need two of finance
      - id: medium-transfer
        when: {args.amount: {gt: 100}}
        decision: require_approval
        approvers: {roles: [ops, finance]}
        reason: medium transfers need ops or finance
"""


@pytest.fixture
def reroute_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "signoff.yaml"
    path.write_text(textwrap.dedent(REROUTE))
    monkeypatch.chdir(tmp_path)
    return path


@pytest.fixture
def agent2(reroute_config: Path) -> Iterator[Gate]:
    with Gate.from_config(reroute_config) as gate:
        yield gate


@pytest.fixture
def approver2(reroute_config: Path) -> Iterator[CliGate]:
    with CliGate(Policy.load(reroute_config), os_user="tester") as gate:
        yield gate


def transfer(gate: Gate, amount: int, thread: str = "t-1") -> ApprovalRequest:
    ctx = CallContext(principal=Principal("erin"), agent="billing-bot", thread=thread)
    request = gate.submit([ToolCall("transfer_funds", {"amount": amount, "to": "ACME"})], ctx)
    assert request.request is not None
    return request.request


def detail_text(app: object) -> str:
    screen = getattr(app, "screen")  # noqa: B009
    return str(screen.query_one("#detail-body", Static).render())


async def test_an_edit_onto_a_stricter_rule_says_so_and_the_detail_shows_the_diff(
    agent2: Gate, approver2: CliGate
) -> None:
    req = transfer(agent2, 500)
    app = make_app(approver2, me="dave")
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        assert row_text(app, req.id)[4] == "medium-transfer"
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "detail")
        assert "rule medium-transfer — medium transfers need ops or finance" in detail_text(app)
        await pilot.press("e")  # a menu key in the detail acts on the request
        await until(pilot, lambda: isinstance(app.screen, EditScreen), "the form opens")
        app.screen.query_one("#arg-0", Input).value = "900000"
        await pilot.press("enter")
        await until(pilot, lambda: "The edit moved transfer_funds" in app.notes[-1], "note")
        assert "to rule large-transfer: it has not run and now needs 2 approvals" in app.notes[-1]
        await until(pilot, lambda: row_text(app, req.id)[4] == "large-transfer", "re-routed")
        cells = row_text(app, req.id)
        assert cells[5] == "0/2" and cells[8] == "waiting for others"  # dave is not finance
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "detail")
        shown = detail_text(app)
        assert "args (edited — these run): " in shown and "amount: 500 → 900000" in shown
        assert "rule large-transfer — large transfers need two of finance" in shown
    after = stored(agent2, req.id)
    assert after.pending and after.calls[0].action.args["amount"] == 900_000


async def test_the_arrow_keys_move_like_j_and_k(agent2: Gate, approver2: CliGate) -> None:
    first, second = transfer(agent2, 500, "t-1"), transfer(agent2, 600, "t-2")
    app = make_app(approver2, me="bob")
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 2, "listed")
        top = app.selected_id
        assert top is not None
        below = ({first.id, second.id} - {top}).pop()
        await pilot.press("down")
        assert app.selected_id == below
        await pilot.press("up")
        assert app.selected_id == top
        await pilot.press("j")
        assert app.selected_id == below
        await pilot.press("y")  # acts on the selected row
        await until(pilot, lambda: app.table.row_count == 1, "it leaves")
    assert stored(agent2, below).calls[0].resolution == "approved"
    assert stored(agent2, top).pending


async def test_the_deadline_counts_down_and_q_quits(agent2: Gate, approver2: CliGate) -> None:
    req = transfer(agent2, 500)
    app = make_app(approver2, me="bob")
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        before = row_text(app, req.id)[7]
        await until(pilot, lambda: row_text(app, req.id)[7] != before, "a second passes")
        assert row_text(app, req.id)[7] < before  # "59m58s" after "59m59s"
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, "the app quits")
    assert stored(agent2, req.id).pending  # quitting decides nothing


async def test_a_key_the_rule_does_not_offer_is_refused_inline(
    agent: Gate, local_gate: CliGate
) -> None:
    req = ask(agent, "deploy", {"env": "prod"})  # approve, reject, respond; nothing editable
    app = make_app(local_gate, me="dave")
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await pilot.press("e")
        await until(
            pilot, lambda: "deploy: the policy does not offer edit here" in app.notes[-1], ""
        )
        assert not isinstance(app.screen, EditScreen)
    assert stored(agent, req.id).pending


async def test_only_y_confirms_a_grant(agent: Gate, local_gate: CliGate) -> None:
    req = ask(agent)
    app = make_app(local_gate)
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked to confirm")
        await pilot.press("enter", "space", "1")  # none of them confirms
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "cancelled")
    assert stored(agent, req.id).pending and agent.list_grants() == []


async def test_a_request_i_decide_leaves_with_one_note(agent: Gate, local_gate: CliGate) -> None:
    """The decision's own answer and the change stream both report it: one note."""
    req = ask(agent)
    app = make_app(local_gate)
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await pilot.press("y")
        await until(pilot, lambda: app.table.row_count == 0, "it leaves")
        ask(agent, "deploy", {"env": "prod"})  # heard after the decision's own change
        await until(pilot, lambda: app.table.row_count == 1, "the stream got that far")
        assert sum(f"{req.id} transfer_funds: ✅ Approved by bob" == n for n in app.notes) == 1
