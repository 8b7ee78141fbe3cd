"""The small screens over the inbox: help, detail, a question, a confirmation, an edit form.

Agent text reaches them only as :class:`~rich.text.Text` (literal) or through
:func:`~signoff.model.text.inert`; widgets are never given a ``str`` that holds it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult, SuspendNotSupported
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from signoff.channels import menu
from signoff.model import ApprovalRequest, SignoffError
from signoff.model.text import editable_json, inert


def _plain(text: str, style: str = "") -> Static:
    return Static(Text(text, style=style))


class HelpScreen(ModalScreen[None]):
    """Every key, from the shared menu."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False)
        for item in menu.MENU:
            table.add_row(Text(" / ".join(item.keys), style="bold"), Text(item.label))
        for keys, label in menu.NAVIGATION:
            table.add_row(Text(keys, style="bold"), Text(label))
        with Vertical(classes="dialog"):
            yield _plain("signoff watch — keys", "bold")
            yield Static(table)
            yield _plain("escape closes this help", "dim")


class DetailScreen(ModalScreen[str | None]):
    """One request in full; a menu key closes it and acts on the request."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,o", "dismiss(None)", "back"),
        *(
            Binding(",".join(k for k in item.keys if k != "enter"), f"choose('{item.action}')")
            for item in menu.MENU
            if item.action != "open"
        ),
    ]

    def __init__(self, body: RenderableType) -> None:
        super().__init__()
        self.body = body

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog detail"):
            yield Static(self.body, id="detail-body")
            yield _plain(menu.menu_line(i for i in menu.MENU if i.action != "open"), "dim")

    def action_choose(self, action: str) -> None:
        self.dismiss(action)


class AskScreen(ModalScreen[str | None]):
    """One line of text (a reason, an answer); escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "cancel")]

    def __init__(self, question: str, about: str) -> None:
        super().__init__()
        self.question = question
        self.about = about

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield _plain(inert(self.about))
            yield _plain(self.question, "bold")
            yield Input(id="answer")
            yield Static(Text(""), classes="error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if not event.value.strip():
            self.query_one(".error", Static).update(Text("it cannot be empty", style="red"))
            return
        self.dismiss(event.value)


class ConfirmScreen(ModalScreen[bool]):
    """States exactly what a choice does, and asks y / n. Only ``y`` confirms: a reflexive
    ``enter`` (the key that opens a request) never widens an approval."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "dismiss(True)", "confirm"),
        Binding("n,escape", "dismiss(False)", "cancel"),
    ]

    def __init__(self, statement: str) -> None:
        super().__init__()
        self.statement = statement

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield _plain(inert(self.statement), "bold")
            yield _plain("confirm with y, cancel with n")


class EditScreen(ModalScreen[dict[str, Any] | None]):
    """The editable arguments, one field each (JSON values, or text); ``ctrl+e`` opens all
    the arguments as JSON in ``$EDITOR``. Checked before sending; the gate re-checks."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(None)", "cancel"),
        Binding("ctrl+e", "external", "$EDITOR", priority=True),  # over Input's ctrl+e
        Binding("ctrl+s", "save", "send"),
    ]

    def __init__(self, req: ApprovalRequest, call_id: str) -> None:
        super().__init__()
        self.req = req
        self.call_id = call_id
        self.names = menu.editable_names(req, call_id)

    def compose(self) -> ComposeResult:
        args = self.req.call(self.call_id).action.args
        with Vertical(classes="dialog"):
            yield _plain(f"edit {inert(self.req.call(self.call_id).action.name)}", "bold")
            for i, name in enumerate(self.names):
                yield _plain(inert(name))
                yield Input(value=editable_json(args.get(name)), id=f"arg-{i}")
            yield _plain("enter / ctrl+s sends · ctrl+e opens $EDITOR · escape cancels", "dim")
            yield Static(Text(""), classes="error")

    def on_input_submitted(self, _event: Input.Submitted) -> None:
        self.action_save()

    def action_save(self) -> None:
        args = dict(self.req.call(self.call_id).action.args)
        for i, name in enumerate(self.names):
            args[name] = menu.parse_value(self.query_one(f"#arg-{i}", Input).value)
        self._finish(args)

    def action_external(self) -> None:
        args = self.req.call(self.call_id).action.args
        editor = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")
        with tempfile.TemporaryDirectory(prefix="signoff-edit-") as tmp:
            path = Path(tmp) / "args.json"
            path.write_text(editable_json(args, indent=2) + "\n", "utf-8")
            try:
                with self.app.suspend():  # the editor gets the terminal
                    subprocess.run([*editor, str(path)], check=False)
            except SuspendNotSupported:  # no terminal to hand over (headless)
                subprocess.run([*editor, str(path)], check=False, stdin=subprocess.DEVNULL)
            written = path.read_text("utf-8")  # editors may replace the file: read it anew
        try:
            self._finish(menu.parse_args_json(written))
        except SignoffError as exc:
            self._error(str(exc))

    def _finish(self, args: dict[str, Any]) -> None:
        try:
            menu.edit(self.req, self.call_id, args)  # refuses a non-editable change here
        except SignoffError as exc:
            self._error(str(exc))
            return
        self.dismiss(args)

    def _error(self, text: str) -> None:
        self.query_one(".error", Static).update(Text(inert(text), style="red"))
