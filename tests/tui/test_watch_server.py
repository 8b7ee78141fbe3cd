"""``signoff watch --server``: a real ``signoff serve`` on loopback, an approver token, live
through ``/v1/events``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from signoff.cli.watch_commands import detail_view
from signoff.client.http import ApiClient
from signoff.store import SQLiteStore
from signoff.tui import ServerSource, WatchApp
from signoff.tui.dialogs import ConfirmScreen
from tests.server.conftest import Server, start_server
from tests.tui.conftest import until


@pytest.fixture
def server(tmp_path: object) -> Iterator[Server]:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    srv = start_server(SQLiteStore(tmp_path / "server.db"))
    yield srv
    srv.close()


def make_app(server: Server, who: str) -> WatchApp:
    source = ServerSource(ApiClient(server.url, server.tokens[who]), server.url)
    return WatchApp(source, detail_view(None))


def status(server: Server, request_id: str) -> dict[str, object]:
    data: dict[str, object] = server.client("alice").get(f"/v1/requests/{request_id}").json()
    return data


async def test_approves_as_the_tokens_person_and_follows_events(server: Server) -> None:
    first = server.pending()
    app = make_app(server, "bob")
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        second = server.pending(call_id="call_2", thread="t-2")
        await until(pilot, lambda: app.table.row_count == 2, "a new request arrives by SSE")
        app.table.move_cursor(row=app.table.get_row_index(first))
        await pilot.press("y")
        await until(pilot, lambda: any("Approved by bob" in n for n in app.notes), "note")
        assert app.source.me == "bob"  # from GET /v1/me
        server.client("carol").post(
            f"/v1/requests/{second}/decisions", json={"decisions": [{"type": "approve"}]}
        )
        await until(pilot, lambda: app.table.row_count == 0, "decided elsewhere: it leaves")
        await until(pilot, lambda: any("Approved by carol" in n for n in app.notes), "note")
    assert status(server, first)["status"] == "resolved"


async def test_the_servers_refusal_shows_inline(server: Server) -> None:
    request_id = server.pending()
    app = make_app(server, "frank")  # no role: the rule does not admit frank
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        you = app.table.get_row(request_id)[-1]
        assert you.plain == "waiting for others"  # GET /v1/me: frank, no role the rule asks
        await pilot.press("y")
        await until(pilot, lambda: app.notes[-1].startswith("refused:"), "refused inline")
        assert app.table.row_count == 1
    assert status(server, request_id)["status"] == "pending"


async def test_grant_through_the_server_states_the_scope_first(server: Server) -> None:
    request_id = server.pending()
    app = make_app(server, "bob")
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 1, "listed")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked to confirm")
        screen = app.screen
        assert isinstance(screen, ConfirmScreen)
        assert "also approve `transfer_funds` calls under rule large-transfer" in screen.statement
        assert "for frank on thread t-1" in screen.statement
        await pilot.press("y")
        await until(pilot, lambda: app.table.row_count == 0, "it leaves")
        await until(pilot, lambda: app.notes[-1].startswith("granted: also approve"), "note")
        assert " until 20" in app.notes[-1]  # the server's exact expiry
    grants = server.client("alice").get("/v1/grants").json()["grants"]
    assert [g["source_request"] for g in grants] == [request_id]
