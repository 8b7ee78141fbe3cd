"""``signoff watch``: the live inbox in the terminal.

The list is the pending requests the source shows; it follows the source's change stream
(the store's listener locally, ``/v1/events`` on a server), so a new request appears and a
decided one leaves with a short note, with no polling. A one-second timer redraws only the
deadline countdowns. Every key is the shared menu's (:mod:`signoff.channels.menu`), and
every decision goes to the source, which validates it as the CLI and the API do; a refusal
shows inline.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from signoff.channels import menu
from signoff.model import ApprovalRequest, SignoffError
from signoff.model.text import inert
from signoff.tui import rows
from signoff.tui.dialogs import AskScreen, ConfirmScreen, DetailScreen, EditScreen, HelpScreen
from signoff.tui.sources import Source

Detail = Callable[[ApprovalRequest], RenderableType]
#: Room kept for the table's vertical scrollbar.
SCROLLBAR = 2

CSS = """
.dialog { width: 90%; height: auto; max-height: 90%; border: round $accent;
          background: $panel; padding: 1 2; }
ModalScreen { align: center middle; }
#filter { display: none; }
#filter.shown { display: block; }
#note { height: auto; min-height: 1; padding: 0 1; }
#note.error { color: $error; }
#title { padding: 0 1; text-style: bold; }
"""


class InboxScreen(Screen[None]):
    """The list, its filter and the note line; the menu keys act on the selected row."""

    AUTO_FOCUS = "#inbox"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y,1", "menu('approve')", "approve"),
        Binding("n,2", "menu('reject')", "reject"),
        Binding("a,3", "menu('grant')", "approve + grant"),
        Binding("e", "menu('edit')", "edit"),
        Binding("s", "menu('respond')", "respond"),
        Binding("o", "menu('open')", "open"),
        Binding("j", "move(1)", "down", show=False),
        Binding("k", "move(-1)", "up", show=False),
        Binding("slash", "filter", "filter"),
        Binding("question_mark", "help", "help"),
        Binding("q", "app.quit", "quit"),
        Binding("escape", "close_filter", show=False),
    ]

    def compose(self) -> ComposeResult:
        app = self.watch_app
        who = f"as {app.source.me}" if app.source.me else "as your token's person"
        yield Static(Text(inert(f"signoff watch — {app.source.where}, {who}")), id="title")
        yield Input(placeholder="filter: tool, agent, principal, rule, text…", id="filter")
        table: DataTable[Text] = DataTable(id="inbox", cursor_type="row", zebra_stripes=True)
        for label, key in rows.COLUMNS:
            table.add_column(label, key=key)
        yield table
        yield Static(Text("loading…"), id="note")
        yield Footer()

    @property
    def watch_app(self) -> WatchApp:
        app = self.app
        assert isinstance(app, WatchApp)
        return app

    def action_menu(self, action: str) -> None:
        self.watch_app.act(action)

    def action_move(self, step: int) -> None:
        table = self.query_one("#inbox", DataTable)
        table.move_cursor(row=table.cursor_row + step)

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("shown")
        box.focus()

    def action_close_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.remove_class("shown")
        self.query_one("#inbox", DataTable).focus()

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())

    def on_input_changed(self, event: Input.Changed) -> None:
        self.watch_app.set_filter(event.value)

    def on_input_submitted(self, _event: Input.Submitted) -> None:
        self.query_one("#inbox", DataTable).focus()

    def on_data_table_row_selected(self, _event: DataTable.RowSelected) -> None:
        self.watch_app.act("open")

    def on_resize(self, _event: events.Resize) -> None:
        if self.watch_app.requests:
            self.watch_app.redraw()  # the description takes the room there is


class WatchApp(App[None]):
    """The inbox over one :class:`~signoff.tui.sources.Source`."""

    TITLE = "signoff watch"
    CSS = CSS

    def __init__(self, source: Source, detail: Detail) -> None:
        super().__init__()
        self.source = source
        self.detail = detail
        self.requests: dict[str, ApprovalRequest] = {}
        self.filter = ""
        self.notes: list[str] = []  # every note shown, newest last (what tests read)
        self.inbox = InboxScreen()

    async def on_mount(self) -> None:
        await self.push_screen(self.inbox)  # mounted before anything draws into it
        self.load()
        self.set_interval(1.0, self.tick)

    async def on_unmount(self) -> None:
        await self.source.close()

    # ------------------------------------------------------------------ the list
    @work(exclusive=True, group="load")
    async def load(self) -> None:
        try:
            await self.source.open()  # first: a change made while we read is still heard
            found = await self.source.pending()
        except SignoffError as exc:
            self.note(f"cannot read the requests: {exc}", error=True)
            return
        for req in found:
            self.requests[req.id] = req
            self.source.track(req.id)
        self.redraw()
        self.note(f"{len(self.requests)} pending")
        self.follow()

    @work(exclusive=True, group="follow")
    async def follow(self) -> None:
        async for req in self.source.changes():
            self.show(req)

    def show(self, req: ApprovalRequest) -> None:
        """A request as it is now: in the list while pending, else out with a note."""
        known = req.id in self.requests
        if req.pending:
            self.requests[req.id] = req
            self.source.track(req.id)
            self.redraw()
            return
        if known:
            del self.requests[req.id]
            self.redraw()
            tool = ", ".join(a.name for a in req.action_requests)
            self.note(f"{req.id} {tool}: {menu.left_note(req)}")

    def redraw(self) -> None:
        table = self.live_table()
        if table is None:  # the inbox is being taken down (the app is closing)
            return
        selected = self.selected_id
        table.clear()
        shown = [req for req in self.requests.values() if self._matches(req)]
        cells = [rows.row(req, self.source.needs_me(req)) for req in shown]
        room = (table.size.width or self.size.width) - SCROLLBAR
        rows.fit(cells, room, table.cell_padding)
        for req, row in zip(shown, cells, strict=True):
            table.add_row(*(row[key] for _label, key in rows.COLUMNS), key=req.id)
        if selected is not None and selected in self.requests:
            with contextlib.suppress(Exception):  # filtered out
                table.move_cursor(row=table.get_row_index(selected))

    def tick(self) -> None:
        """Redraw the deadline countdowns (once a second)."""
        table = self.live_table()
        if table is None:  # a tick while the app closes: its screens go before its timers
            return
        for req in self.requests.values():
            if self._matches(req):
                try:
                    table.update_cell(req.id, "deadline", rows.cell(rows.countdown(req)))
                except Exception:  # the row left between two redraws
                    continue

    def set_filter(self, text: str) -> None:
        self.filter = text.strip().lower()
        self.redraw()

    def _matches(self, req: ApprovalRequest) -> bool:
        if not self.filter:
            return True
        words = [req.id, req.thread, req.agent or "", req.principal.id]
        for a in req.action_requests:
            words += [a.name, a.rule, a.description, a.risk or ""]
        if req.inquiry:
            words.append(req.inquiry.question)
        return self.filter in " ".join(words).lower()

    @property
    def table(self) -> DataTable[Text]:
        found: DataTable[Text] = self.inbox.query_one("#inbox", DataTable)
        return found

    def live_table(self) -> DataTable[Text] | None:
        """The inbox's table, or None once the inbox's widgets are gone (or not there yet)."""
        for found in self.inbox.query("#inbox").results(DataTable):
            return found
        return None

    @property
    def selected_id(self) -> str | None:
        table = self.table
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return str(key.value) if key.value is not None else None

    def note(self, text: str, *, error: bool = False) -> None:
        self.notes.append(text)
        if not self.inbox.is_mounted:
            return
        line = self.inbox.query_one("#note", Static)
        line.update(Text(inert(text), style="red" if error else ""))
        line.set_class(error, "error")

    # ------------------------------------------------------------------ the menu
    def act(self, action: str) -> None:
        """Do a menu action on the selected request."""
        request_id = self.selected_id
        if request_id is None:
            self.note("nothing selected")
            return
        req = self.requests[request_id]
        if action == "open":
            self.push_screen(DetailScreen(self.detail(req)), self._after_detail)
            return
        mine = self.source.needs_me(req)
        calls = mine if mine else req.pending_call_ids
        if not calls:
            self.note(f"{req.id}: nothing left for you to decide", error=True)
            return
        call_id = calls[0]
        allowed = {i.action for i in menu.offered(req, call_id)}
        if action not in allowed:
            name = req.action_request(call_id).name
            self.note(f"{name}: the policy does not offer {action} here", error=True)
            return
        if action == "approve":
            self.decide(req.id, [menu.approve(c) for c in calls])
        elif action == "grant":
            self._grant(req, call_id)
        elif action == "reject":
            tools = ", ".join(a.name for a in req.action_requests)

            def rejected(reason: str | None) -> None:
                if reason:
                    self._send_built(req, lambda: [menu.reject(c, reason) for c in calls])

            self.push_screen(AskScreen("reason (the agent sees it):", f"reject {tools}"), rejected)
        elif action == "edit":

            def edited(args: dict[str, Any] | None) -> None:
                if args is not None:
                    self._send_built(req, lambda: [menu.edit(req, call_id, args)])

            self.push_screen(EditScreen(req, call_id), edited)
        elif action == "respond":

            def answered(answer: str | None) -> None:
                if answer:
                    self._send_built(req, lambda: [menu.respond(call_id, answer)])

            question = req.inquiry.question if req.inquiry else ""
            self.push_screen(AskScreen("your answer:", question), answered)

    def _after_detail(self, action: str | None) -> None:
        if action is not None:
            self.act(action)

    def _grant(self, req: ApprovalRequest, call_id: str) -> None:
        try:
            statement = self.source.grant_text(req, call_id)
        except SignoffError as exc:
            self.note(str(exc), error=True)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.decide(req.id, [menu.grant(call_id)])

        self.push_screen(ConfirmScreen(f"Approve this call, and {statement}?"), confirmed)

    def _send_built(
        self, req: ApprovalRequest, build: Callable[[], Sequence[Mapping[str, Any]]]
    ) -> None:
        try:
            decisions = build()
        except SignoffError as exc:
            self.note(str(exc), error=True)
            return
        self.decide(req.id, decisions)

    @work(group="decide")
    async def decide(self, request_id: str, decisions: Sequence[Mapping[str, Any]]) -> None:
        try:
            req = await self.source.decide(request_id, decisions)
        except SignoffError as exc:
            self.note(f"refused: {exc}", error=True)
            return
        if req.pending:
            self.show(req)
            moved = req.reroute_notices()  # an edit that landed on a stricter rule
            if moved:
                self.note(f"{req.id}: " + " ".join(moved))
            else:
                self.note(f"{req.id}: recorded; waiting for more approvers ({menu.progress(req)})")
        else:
            self.show(req)  # leaves with its note, unless the change stream was first
        for text in self.source.granted:
            self.note(f"granted: {text}")
