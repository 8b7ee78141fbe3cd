"""``signoff watch`` on the local store: a real SQLite file, the agent on another gate."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import DataTable, Input, Static

from signoff import Gate
from signoff.cli.deciding import CliGate
from signoff.cli.watch_commands import detail_view
from signoff.tui import LocalSource, WatchApp
from signoff.tui.dialogs import AskScreen, ConfirmScreen, DetailScreen, EditScreen, HelpScreen
from tests.tui.conftest import ask, until


def make_app(gate: CliGate, me: str = "bob") -> WatchApp:
    return WatchApp(LocalSource(gate, me), detail_view(gate.policy))


def table(app: WatchApp) -> DataTable[Any]:
    return app.table


def row_text(app: WatchApp, request_id: str) -> list[str]:
    return [c.plain if isinstance(c, Text) else str(c) for c in app.table.get_row(request_id)]


def stored(gate: Gate, request_id: str) -> Any:
    return gate.run_sync(gate.get(request_id))


async def test_lists_pending_and_follows_new_requests_live(
    agent: Gate, local_gate: CliGate
) -> None:
    first = ask(agent)
    app = make_app(local_gate)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "the pending request is listed")
        cells = row_text(app, first.id)
        assert cells[0] == "transfer_funds" and cells[1] == "high"
        assert cells[2] == "Transfer 50000 to ACME"
        assert cells[3] == "billing-bot → erin" and cells[4] == "transfer_funds.default"
        assert cells[5] == "0/1" and cells[8] == "needs you"
        second = ask(agent, "deploy", {"env": "prod"})
        await until(pilot, lambda: app.table.row_count == 2, "the new request appears")
        assert row_text(app, second.id)[8] == "waiting for others"  # bob is not in ops


async def test_a_tick_or_a_change_while_the_inbox_is_taken_down_is_ignored(
    agent: Gate, local_gate: CliGate
) -> None:
    """The app removes its screens before it stops its timers and workers: a countdown tick
    (once a second) or a followed change landing in between must not fail the app."""
    req = ask(agent)
    app = make_app(local_gate)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await app.table.remove()  # as the app's shutdown does
        assert app.live_table() is None
        app.tick()
        app.show(req)
        app.redraw()
        await pilot.pause()
        assert app.is_running and app.return_code is None


async def test_y_approves_and_the_request_leaves_with_a_note(
    agent: Gate, local_gate: CliGate
) -> None:
    req = ask(agent)
    app = make_app(local_gate)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await pilot.press("y")
        await until(pilot, lambda: app.table.row_count == 0, "the decided request leaves")
        await until(pilot, lambda: any("Approved by bob" in n for n in app.notes), "note")
    after = stored(agent, req.id)
    assert after.calls[0].resolution == "approved"
    assert after.decisions[0].channel == "cli" and after.decisions[0].os_user == "tester"


async def test_a_request_decided_elsewhere_leaves_with_who_decided(
    agent: Gate, local_gate: CliGate
) -> None:
    req = ask(agent)
    app = make_app(local_gate)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        agent.decide(req.id, [{"type": "approve"}], approver="carol", channel="web")
        await until(pilot, lambda: app.table.row_count == 0, "it leaves")
        await until(pilot, lambda: any("Approved by carol" in n for n in app.notes), "note")


async def test_n_asks_for_the_reason_and_rejects(agent: Gate, local_gate: CliGate) -> None:
    req = ask(agent)
    app = make_app(local_gate)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await pilot.press("2")
        await until(pilot, lambda: isinstance(app.screen, AskScreen), "the reason is asked")
        await pilot.press("enter")  # empty: refused inline, still asking
        assert isinstance(app.screen, AskScreen)
        await pilot.press(*"too much")
        await pilot.press("enter")
        await until(pilot, lambda: app.table.row_count == 0, "it leaves")
    after = stored(agent, req.id)
    assert after.calls[0].resolution == "rejected" and after.calls[0].message == "too much"


async def test_a_shows_the_exact_grant_then_confirms(agent: Gate, local_gate: CliGate) -> None:
    req = ask(agent)
    app = make_app(local_gate)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked to confirm")
        screen = app.screen
        assert isinstance(screen, ConfirmScreen)
        assert screen.statement.startswith(
            "Approve this call, and also approve `transfer_funds` calls under rule "
            "transfer_funds.default from billing-bot for erin on thread t-1 until "
        )
        await pilot.press("y")
        await until(pilot, lambda: app.table.row_count == 0, "it leaves")
        await until(pilot, lambda: app.notes[-1].startswith("granted: also approve"), "note")
    after = stored(agent, req.id)
    grants = agent.list_grants()
    assert after.decisions[0].grant_id == grants[0].id and grants[0].created_by == "bob"


async def test_a_declined_creates_nothing(agent: Gate, local_gate: CliGate) -> None:
    req = ask(agent)
    app = make_app(local_gate)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await pilot.press("3")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked to confirm")
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "closed")
    assert stored(agent, req.id).pending and agent.list_grants() == []


async def test_grant_is_not_offered_for_a_quorum(agent: Gate, local_gate: CliGate) -> None:
    ask(agent, "pay_many", {"n": 3})
    app = make_app(local_gate)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await pilot.press("a")
        await until(pilot, lambda: "does not offer grant" in app.notes[-1], "refused inline")


async def test_quorum_progress_then_the_second_approver(agent: Gate, local_gate: CliGate) -> None:
    req = ask(agent, "pay_many", {"n": 3})
    app = make_app(local_gate)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await pilot.press("y")
        await until(pilot, lambda: row_text(app, req.id)[5] == "1/2", "quorum progress")
        assert row_text(app, req.id)[8] == "waiting for others"
        agent.decide(req.id, [{"type": "approve"}], approver="carol", channel="web")
        await until(pilot, lambda: app.table.row_count == 0, "it leaves")


async def test_e_edits_the_editable_arguments(agent: Gate, local_gate: CliGate) -> None:
    req = ask(agent)
    app = make_app(local_gate)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, EditScreen), "the form opens")
        field = app.screen.query_one("#arg-0", Input)
        field.value = '"lots"'  # the schema-less policy lets any JSON through; check below
        field.value = "25000"
        await pilot.press("enter")
        await until(pilot, lambda: app.table.row_count == 0, "it leaves")
    after = stored(agent, req.id)
    assert after.calls[0].resolution == "edited"
    assert after.calls[0].action.args == {"amount": 25000, "to": "ACME"}


async def test_self_approval_is_refused_inline(agent: Gate, local_gate: CliGate) -> None:
    req = ask(agent)  # for erin, who is in finance; the rule forbids self-approval
    app = make_app(local_gate, me="erin")
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        assert row_text(app, req.id)[8] == "waiting for others"
        await pilot.press("y")
        await until(pilot, lambda: app.notes[-1].startswith("refused:"), "refused inline")
        assert app.table.row_count == 1
    assert stored(agent, req.id).pending


async def test_filter_help_and_detail(agent: Gate, local_gate: CliGate) -> None:
    ask(agent)
    second = ask(agent, "deploy", {"env": "prod"})
    app = make_app(local_gate, me="dave")
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 2, "listed")
        await pilot.press("slash", *"deploy")
        await until(pilot, lambda: app.table.row_count == 1, "filtered")
        assert app.selected_id == second.id
        await pilot.press("enter", "escape")  # back to the list, filter cleared
        await until(pilot, lambda: app.table.row_count == 2, "unfiltered")
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen), "help closed")
        await pilot.press("j", "k", "j")
        chosen = app.selected_id
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "detail")
        body = str(app.screen.query_one("#detail-body", Static).render())
        assert body.startswith(f"{chosen}  pending  (tool_call)")
        assert "quorum 0/1; may answer: " in body


async def test_hostile_agent_text_is_inert(agent: Gate, local_gate: CliGate) -> None:
    hostile = "[bold red]FAKE[/] \x1b[2J\u202eevil [@click=app.quit]x[/]"
    req = ask(
        agent,
        args={"amount": 50_000, "to": hostile},
        user_request=hostile,
        reasoning=hostile,
    )
    app = make_app(local_gate)
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        description = row_text(app, req.id)[2]
        assert description == (
            "Transfer 50000 to [bold red]FAKE[/] ␛[2J<U+202E>evil [@click=app.quit]x[/]"
        )
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "detail")
        shown = str(app.screen.query_one("#detail-body", Static).render())
        assert "user asked: [bold red]FAKE[/] ␛[2J<U+202E>evil [@click=app.quit]x[/]" in shown
        assert "\x1b" not in shown and "\u202e" not in shown
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, DetailScreen), "closed")
        assert app.is_running  # the [@click=app.quit] did nothing


async def test_ctrl_e_edits_the_arguments_as_json_in_editor(
    agent: Gate, local_gate: CliGate, tmp_path: Any, monkeypatch: Any
) -> None:
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nsed -i "s/50000/20000/" "$1"\n')
    editor.chmod(0o755)
    monkeypatch.setenv("VISUAL", str(editor))
    req = ask(agent)
    app = make_app(local_gate)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, EditScreen), "the form opens")
        await pilot.press("ctrl+e")
        await until(pilot, lambda: app.table.row_count == 0, "it leaves")
    assert stored(agent, req.id).calls[0].action.args == {"amount": 20000, "to": "ACME"}


async def test_editor_changing_a_fixed_argument_is_refused_in_the_form(
    agent: Gate, local_gate: CliGate, tmp_path: Any, monkeypatch: Any
) -> None:
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nsed -i "s/ACME/EVIL/" "$1"\n')
    editor.chmod(0o755)
    monkeypatch.setenv("VISUAL", str(editor))
    req = ask(agent)
    app = make_app(local_gate)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, EditScreen), "the form opens")
        await pilot.press("ctrl+e")
        error = app.screen.query_one(".error", Static)
        await until(pilot, lambda: "to may not be edited" in str(error.render()), "refused")
    assert stored(agent, req.id).pending


async def test_detail_masks_secret_arguments(agent: Gate, local_gate: CliGate) -> None:
    ask(agent, args={"amount": 50_000, "to": "ACME", "api_key": "sk-live-123"})
    app = make_app(local_gate)
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "detail")
        shown = str(app.screen.query_one("#detail-body", Static).render())
        assert '"api_key": "••••••"' in shown and "sk-live-123" not in shown


async def test_a_menu_key_in_the_detail_acts_on_that_request(
    agent: Gate, local_gate: CliGate
) -> None:
    req = ask(agent)
    app = make_app(local_gate)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "detail")
        await pilot.press("1")
        await until(pilot, lambda: app.table.row_count == 0, "approved from the detail")
    assert stored(agent, req.id).calls[0].resolution == "approved"


async def test_a_chain_shows_its_stage_and_asks_each_stage_in_turn(
    agent: Gate, local_gate: CliGate
) -> None:
    req = ask(agent, "pay_vendor", {"vendor": "ACME"})
    app = make_app(local_gate)  # bob: finance, the second stage
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        cells = row_text(app, req.id)
        assert cells[5] == "stage 1 of 2: 0 of 1 manager approval"
        assert cells[8] == "waiting for others"
        agent.decide(req.id, [{"type": "approve"}], approver="mia", channel="web")
        await until(pilot, lambda: row_text(app, req.id)[8] == "needs you", "stage 2 asks bob")
        assert row_text(app, req.id)[5] == "stage 2 of 2: 0 of 1 finance approval"
        await pilot.press("a")  # a chain cannot be stood in for by a grant
        await until(pilot, lambda: "does not offer grant" in app.notes[-1], "refused inline")
        await pilot.press("y")
        await until(pilot, lambda: app.table.row_count == 0, "the chain completes")
    assert stored(agent, req.id).calls[0].resolution == "approved"
