"""``signoff watch --server``: a real ``signoff serve`` on loopback, an approver token, live
through ``/v1/events``."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest

from signoff import Policy
from signoff.cli.watch_commands import detail_view
from signoff.client.http import ApiClient
from signoff.store import SQLiteStore
from signoff.tui import ServerSource, WatchApp
from signoff.tui.dialogs import ConfirmScreen
from tests.server.conftest import POLICY as SERVER_POLICY
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


async def test_an_older_server_without_v1_me_shows_who_after_the_first_decision(
    server: Server,
) -> None:
    """Against a server without ``GET /v1/me`` the "you" column reads ``?`` (the server still
    decides who may), until a decision recorded through the token names its person; their
    roles then come from ``--config``'s policy."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    def gone(_request: Request) -> JSONResponse:
        return JSONResponse({"error": "not found"}, status_code=404)

    server.app.router.routes.insert(0, Route("/v1/me", gone))  # as before /v1/me existed
    first = server.pending()
    second = server.pending(call_id="call_2", thread="t-2")
    policy = Policy.from_yaml(textwrap.dedent(SERVER_POLICY))  # signoff watch --config
    source = ServerSource(ApiClient(server.url, server.tokens["bob"]), server.url, policy)
    app = WatchApp(source, detail_view(policy))
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 2, "listed")
        assert app.source.me is None
        assert [app.table.get_row(r)[-1].plain for r in (first, second)] == ["?", "?"]
        app.table.move_cursor(row=app.table.get_row_index(first))
        await pilot.press("y")
        await until(pilot, lambda: app.table.row_count == 1, "the first leaves")
        assert app.source.me == "bob"  # named by the decision the server recorded
        await until(pilot, lambda: app.table.get_row(second)[-1].plain == "needs you", "known")
        server.pending(call_id="call_3", thread="t-3")  # an event after the decision's
        await until(pilot, lambda: app.table.row_count == 2, "the stream got that far")
        assert sum("Approved by bob" in n for n in app.notes) == 1  # one note, not two
