"""``signoff watch``: the live approval inbox in this terminal (the ``signoff[tui]`` extra).

Local mode decides as ``--as`` on the config's store (like ``signoff approve``); with
``--server`` (or a config whose ``remote:`` names one) it decides through the API as the
approver token's person and follows ``/v1/events``. The Textual app is in
:mod:`signoff.tui`; the detail view is :func:`signoff.cli.render.request_detail`'s, so it
shows exactly what ``signoff show`` shows.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from typing import TYPE_CHECKING

import typer
from rich.console import Console, RenderableType
from rich.text import Text

from signoff.cli import deciding, errors, render
from signoff.cli.deciding import ServerOpt, TokenOpt
from signoff.cli.main import AsOpt, ConfigOpt, open_gate
from signoff.model import ApprovalRequest

if TYPE_CHECKING:
    from signoff.policy import Policy


def register(app: typer.Typer) -> None:
    app.command("watch")(watch)


def watch(
    config: ConfigOpt = None,
    approver: AsOpt = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """A live, full-screen approval inbox: y approve, n reject, a approve + grant, e edit,
    s respond, o open, / filter, ? help, q quit."""
    try:
        from signoff.tui import LocalSource, ServerSource, WatchApp
    except ImportError as exc:
        errors.report(f"signoff watch needs the signoff[tui] extra ({exc.name} is missing)", 2)
    if (srv := deciding.connect(config, server, token, acting_as=approver)) is not None:
        try:
            from signoff.client.http import ApiClient
        except ImportError as exc:
            errors.report(f"--server needs the signoff[client] extra ({exc.name} is missing)", 2)

        async def main() -> None:
            source = ServerSource(ApiClient(srv.url, srv.token), srv.url, srv.policy)
            await WatchApp(source, detail_view(srv.policy)).run_async()

        asyncio.run(main())
        return
    me = deciding.require_as(approver)
    with open_gate(config, acting_as=me) as gate:
        WatchApp(LocalSource(gate, me), detail_view(gate.policy)).run()


def detail_view(policy: Policy | None) -> Callable[[ApprovalRequest], RenderableType]:
    """``signoff show``'s view of a request, as a renderable (inert text, styles kept)."""

    def view(req: ApprovalRequest) -> RenderableType:
        console = Console(file=io.StringIO(), width=100, record=True, force_terminal=True)
        render.request_detail(console, req, policy)
        return Text.from_ansi(console.export_text(styles=True))

    return view
