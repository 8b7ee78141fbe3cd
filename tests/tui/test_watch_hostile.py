"""``signoff watch`` against a hostile agent: every surface of the app (the row, the detail, the
grant confirmation, the reason and answer dialogs, the edit form and ``$EDITOR``, the notes)
shows agent text literally — Rich and Textual markup, ``[@click=…]`` actions, escape codes,
bidi overrides, zero-width characters, line breaks — and very long text cannot push the
columns that say who decides off the screen."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.widgets import Input, Static

from signoff import CallContext, Gate, Policy, Principal, ToolCall
from signoff.cli.deciding import CliGate
from signoff.model import ApprovalRequest
from signoff.tui import rows
from signoff.tui.dialogs import AskScreen, ConfirmScreen, EditScreen
from tests.tui.conftest import ask, until
from tests.tui.test_watch_local import make_app, row_text, stored

#: What a hostile agent writes: markup for Rich and Textual (a click action that would quit
#: the app), a screen-clearing escape, a bidi override, a zero-width space and a line break.
HOSTILE = "[bold red]OK[/] [@click=app.quit]x[/] \x1b[2J\u202eevil\u200b\nnext"
#: The same text as every surface must show it.
SHOWN = "[bold red]OK[/] [@click=app.quit]x[/] ␛[2J<U+202E>evil<U+200B>⏎next"
RAW = ("\x1b", "\u202e", "\u200b")  # a line break shows as ⏎ (in SHOWN)


def literal(screen_text: str) -> None:
    """No raw control, bidi or invisible character reached the widget."""
    for char in RAW:
        assert char not in screen_text, f"{char!r} reached the terminal"


def statics(app: Any) -> str:
    """Everything the current screen's static texts render, one per line."""
    return "\n".join(str(s.render()) for s in app.screen.query(Static))


def submit(gate: Gate, tool: str, args: dict[str, Any], **context: Any) -> ApprovalRequest:
    ctx = CallContext(principal=Principal("erin"), thread="t-1", **context)
    request = gate.submit([ToolCall(tool, args)], ctx).request
    assert request is not None
    return request


async def test_every_cell_of_the_row_is_literal(agent: Gate, local_gate: CliGate) -> None:
    req = submit(agent, "transfer_funds", {"amount": 5, "to": HOSTILE}, agent="bot" + HOSTILE)
    app = make_app(local_gate)
    async with app.run_test(size=(220, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        cells = row_text(app, req.id)
        assert f"Transfer 5 to {SHOWN}".startswith(cells[2].removesuffix("…"))
        assert "[@click=app.quit]x[/] ␛[2J<U+202E>evil<U+200B>⏎" in cells[2]
        assert cells[3] == "bot[bold red]O… → erin"
        for cell in app.table.get_row(req.id):
            assert isinstance(cell, Text) and not cell.spans  # literal: no markup became style
            literal(cell.plain)
        assert app.is_running


async def test_long_agent_text_is_cut_and_who_decides_stays_on_screen(
    agent: Gate, local_gate: CliGate
) -> None:
    long = "W" * 2000
    req = submit(agent, "transfer_funds", {"amount": 5, "to": long}, agent="a" + long)
    app = make_app(local_gate)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        cells = row_text(app, req.id)
        assert cells[2].startswith("Transfer 5 to WWW") and cells[2].endswith("…")
        assert cells[3] == "a" + "W" * 13 + "… → erin"  # the principal is never cut away
        assert cells[8] == "needs you"
        table = app.table
        used = sum(c.get_render_width(table) for c in table.columns.values())
        assert used <= table.size.width  # every column, "you" last, is on the screen
        await pilot.resize_terminal(100, 40)
        await until(pilot, lambda: len(row_text(app, req.id)[2]) == rows.DESCRIPTION_MIN, "cut")
        await pilot.resize_terminal(160, 40)
        await until(pilot, lambda: len(row_text(app, req.id)[2]) > rows.DESCRIPTION_MIN, "wider")
        await pilot.press("o")  # the detail shows all of it
        await until(pilot, lambda: long in statics(app).replace("\n", ""), "the whole text")


async def test_the_detail_is_literal(agent: Gate, local_gate: CliGate) -> None:
    submit(
        agent,
        "transfer_funds",
        {"amount": 5, "to": HOSTILE, HOSTILE: 1},
        agent=HOSTILE,
        user_request=HOSTILE,
        reasoning=HOSTILE,
    )
    app = make_app(local_gate)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await pilot.press("o")
        await until(pilot, lambda: "user asked: " in statics(app), "the detail")
        shown = statics(app)
        literal(shown)
        assert f"user asked: {SHOWN}" in shown and f"agent's reasoning: {SHOWN}" in shown
        assert f"via agent {SHOWN}" in shown
        await pilot.press("escape")
        assert app.is_running


async def test_the_grant_confirmation_is_literal(agent: Gate, local_gate: CliGate) -> None:
    submit(agent, "transfer_funds", {"amount": 5, "to": "ACME"}, agent=HOSTILE)
    app = make_app(local_gate)
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked to confirm")
        shown = statics(app)
        literal(shown)
        assert f"from {SHOWN} for erin on thread t-1" in shown
        await pilot.press("n")
        assert app.is_running


async def test_an_inquiry_is_answered_with_s_and_its_question_is_literal(
    agent: Gate, local_gate: CliGate
) -> None:
    with agent.context(principal="erin", agent="billing-bot", thread="t-1"):
        inquiry = agent.ask(HOSTILE, wait=False)
    assert isinstance(inquiry, ApprovalRequest)
    app = make_app(local_gate)
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        assert row_text(app, inquiry.id)[2] == SHOWN
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, AskScreen), "the answer is asked")
        shown = statics(app)
        literal(shown)
        assert SHOWN in shown and "your answer:" in shown
        await pilot.press(*"use the staging account")
        await pilot.press("enter")
        await until(pilot, lambda: app.table.row_count == 0, "answered: it leaves")
    answered = stored(agent, inquiry.id)
    assert answered.calls[0].resolution == "responded"
    assert answered.calls[0].message == "use the staging account"


async def test_a_note_from_another_approver_is_literal(agent: Gate, local_gate: CliGate) -> None:
    req = ask(agent)
    app = make_app(local_gate)
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        agent.decide(req.id, [{"type": "reject", "message": HOSTILE}], approver="carol")
        await until(pilot, lambda: app.table.row_count == 0, "it leaves")
        note = str(app.inbox.query_one("#note", Static).render())
        assert note.endswith(f"Rejected by carol: {SHOWN}")
        literal(note)
        assert app.is_running


@pytest.fixture
def hidden_amount(agent: Gate) -> ApprovalRequest:
    """A request whose editable argument hides a bidi override and a zero-width space."""
    return ask(agent, args={"amount": "50\u202e000\u200b", "to": "ACME"})


async def test_the_edit_form_shows_hidden_characters_as_json_escapes(
    agent: Gate, local_gate: CliGate, hidden_amount: ApprovalRequest
) -> None:
    app = make_app(local_gate)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, EditScreen), "the form opens")
        value = app.screen.query_one("#arg-0", Input).value
        assert value == '"50\\u202e000\\u200b"'  # the same JSON value, nothing hidden
        assert json.loads(value) == "50\u202e000\u200b"
        literal(statics(app))


async def test_the_editor_gets_hidden_characters_as_json_escapes(
    agent: Gate,
    local_gate: CliGate,
    hidden_amount: ApprovalRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = tmp_path / "seen.json"
    editor = tmp_path / "editor.sh"
    editor.write_text(f'#!/bin/sh\ncp "$1" "{seen}"\nsed -i "s/ACME/EVIL/" "$1"\n')
    editor.chmod(0o755)
    monkeypatch.setenv("VISUAL", str(editor))
    app = make_app(local_gate)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, EditScreen), "the form opens")
        await pilot.press("ctrl+e")
        await until(pilot, lambda: "to may not be edited" in statics(app), "refused")
    written = seen.read_text("utf-8")
    literal(written)
    assert '"amount": "50\\u202e000\\u200b"' in written
    assert json.loads(written) == hidden_amount.action_requests[0].args
    assert stored(agent, hidden_amount.id).pending


UNKNOWN_TOOLS = """
version: 1
store: sqlite:///signoff.db
people:
  bob: {roles: [finance]}
defaults:
  unknown_tool:
    decision: require_approval
    approvers: {roles: [finance]}
    allowed_decisions: [approve, edit, reject]
    editable_args: "*"
"""


async def test_a_hostile_tool_name_and_argument_names_are_literal_in_the_edit_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent may name an unknown tool and its arguments as it likes (``defaults.unknown_tool``
    asks a human); the form's title and field labels show them literally."""
    config = tmp_path / "signoff.yaml"
    config.write_text(UNKNOWN_TOOLS)
    monkeypatch.chdir(tmp_path)
    with Gate.from_config(config) as agent, CliGate(Policy.load(config)) as approver:
        submit(agent, "x" + HOSTILE, {HOSTILE: "v"})
        app = make_app(approver)
        async with app.run_test(size=(200, 40)) as pilot:
            await until(pilot, lambda: app.table.row_count == 1, "listed")
            await pilot.press("e")
            await until(pilot, lambda: isinstance(app.screen, EditScreen), "the form opens")
            shown = statics(app)
            literal(shown)
            assert f"edit x{SHOWN}" in shown and f"\n{SHOWN}\n" in f"\n{shown}\n"
            await pilot.press("escape")
            assert app.is_running
