"""The console channel's interactive part: the agent's own terminal asks its person.

``channels: {console: {interactive: true}}``. The person at the agent's terminal is the
principal, so the menu is offered only where the rule lets the principal decide alone
(:func:`~signoff.channels.menu.principal_may_decide`, the MCP in-client rule); otherwise one
line says who it waits for and until when, and the terminal stays free.

One worker thread owns the terminal: requests queue (parallel calls are asked one after
another), and while it waits for a line it also waits on a wake-up pipe, so a decision made
anywhere else (the inbox, Slack, another process on the same store) withdraws the prompt
with a one-line note — the first valid answer wins. Decisions go through the gate's
``adecide`` like every other channel's, on the gate's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import select
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from signoff.channels import menu, message
from signoff.channels.host import GateHandle
from signoff.channels.redact import Redactor
from signoff.model import ApprovalRequest, SignoffError
from signoff.model.text import editable_json, inert

log = logging.getLogger("signoff.channels.console")

PREFIX = "[signoff]"


class Withdrawn(Exception):
    """The request was decided elsewhere while the prompt waited."""


@dataclass(frozen=True, slots=True)
class _Ask:
    request: ApprovalRequest
    gate: GateHandle
    loop: asyncio.AbstractEventLoop


class Terminal:
    """A terminal as two file descriptors: lines in, text out (a TTY, or ``/dev/tty``)."""

    def __init__(self, read_fd: int, write_fd: int, *, owned: bool = False) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self._owned = owned

    @classmethod
    def open(cls, path: str) -> Terminal:
        """The terminal at ``path`` (``/dev/tty``: the controlling terminal, never stdio)."""
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        return cls(fd, fd, owned=True)

    def is_tty(self) -> bool:
        return os.isatty(self.read_fd) and os.isatty(self.write_fd)

    def write(self, text: str) -> None:
        data = text.encode("utf-8", "replace")
        while data:
            data = data[os.write(self.write_fd, data) :]

    def close(self) -> None:
        if self._owned:
            with contextlib.suppress(OSError):
                os.close(self.read_fd)


class TerminalPrompt:
    """Asks the principal at one terminal, one request at a time."""

    def __init__(self, terminal: Terminal) -> None:
        self.terminal = terminal
        self._asks: queue.Queue[_Ask | None] = queue.Queue()
        self._wake_r, self._wake_w = os.pipe()
        self._current: _Ask | None = None
        self._buffer = b""
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def offer(self, request: ApprovalRequest, gate: GateHandle) -> None:
        """Queue ``request`` for the terminal (called on the gate's loop)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="signoff-console-prompt", daemon=True
                )
                self._thread.start()
        self._asks.put(_Ask(request, gate, asyncio.get_running_loop()))

    def changed(self, request: ApprovalRequest) -> None:
        """A request changed somewhere (any thread): wake the prompt if it is the one asked."""
        current = self._current
        if current is not None and request.id == current.request.id and not request.pending:
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"!")

    def close(self) -> None:
        self._asks.put(None)
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"!")

    # ------------------------------------------------------------------ the worker
    def _run(self) -> None:
        while (ask := self._asks.get()) is not None:
            try:
                self._ask(ask)
            except Exception as exc:  # the terminal went away: the other channels go on
                log.warning("console prompt for %s failed: %s", ask.request.id, exc)
            finally:
                self._current = None
                self._buffer = b""

    def _ask(self, ask: _Ask) -> None:
        gate = ask.gate
        req = self._fresh(ask)
        if not req.pending:
            return
        principal = req.principal.id
        out = self.terminal.write
        redact = Redactor.from_policy(gate.policy)
        out(f"\n{PREFIX} {message.title(req)} ({req.id})\n")
        for text in [message.question(req) or "", *message.call_lines(req, redact)]:
            if text:
                out(f"{PREFIX}   {text}\n")
        out(f"{PREFIX}   {message.context_line(req)}\n")
        if not menu.principal_may_decide(gate.policy, req, principal):
            out(f"{PREFIX}   {menu.waiting_for(req)}\n")
            return
        self._drain_wake()
        self._current = ask
        remove = gate.store.add_listener(lambda changed, _event: self.changed(changed))
        try:
            if not self._fresh(ask).pending:  # decided before the listener was in place
                raise Withdrawn
            self._menu(ask, req, principal)
        except Withdrawn:
            out(f"{PREFIX}   withdrawn: {menu.left_note(self._fresh(ask))}\n")
        finally:
            remove()

    def _menu(self, ask: _Ask, req: ApprovalRequest, principal: str) -> None:
        call_id = req.pending_call_ids[0] if len(req.pending_call_ids) == 1 else None
        if call_id is None:
            items = [i for i in menu.MENU if i.action in ("approve", "reject", "open")]
        else:
            items = menu.offered(req, call_id)
        while True:
            self.terminal.write(f"{PREFIX}   {menu.menu_line(items)}\n{PREFIX} your answer: ")
            key = self._line()
            item = menu.item_for(key or "enter")
            if item is None or item not in items:
                self.terminal.write(f"{PREFIX}   not a choice: {inert(key)!r}\n")
                continue
            try:
                decisions = self._decisions(ask, req, item.action, call_id)
            except SignoffError as exc:
                self.terminal.write(f"{PREFIX}   {inert(str(exc))}\n")
                continue
            if decisions is None:
                continue
            if self._send(ask, decisions, principal):
                return

    def _decisions(
        self, ask: _Ask, req: ApprovalRequest, action: str, call_id: str | None
    ) -> list[dict[str, Any]] | None:
        ids = [call_id] if call_id else req.pending_call_ids
        write = self.terminal.write
        if action == "open":
            self._detail(ask)
            return None
        if action == "approve":
            return [menu.approve(c) for c in ids]
        if action == "grant" and call_id:
            # The exact scope and expiry first, then a confirmation (as in `signoff watch`).
            statement = ask.gate.grant_preview(req, call_id, req.principal.id)
            write(f"{PREFIX}   this also approves: {inert(statement)}\n{PREFIX} confirm? [y/N]: ")
            if self._line().strip().lower() not in ("y", "yes"):
                write(f"{PREFIX}   not granted\n")
                return None
            return [menu.grant(call_id)]
        if action == "reject":
            write(f"{PREFIX} reason (the agent sees it): ")
            reason = self._line()
            return [menu.reject(c, reason) for c in ids]
        if action == "respond" and call_id:
            write(f"{PREFIX} your answer: ")
            return [menu.respond(call_id, self._line())]
        if action == "edit" and call_id:
            return [menu.edit(req, call_id, self._edited_args(req, call_id))]
        return None

    def _edited_args(self, req: ApprovalRequest, call_id: str) -> dict[str, Any]:
        args = dict(req.call(call_id).action.args)
        for name in menu.editable_names(req, call_id):
            shown = editable_json(args.get(name))
            self.terminal.write(f"{PREFIX}   {inert(name)} [{shown}]: ")
            typed = self._line()
            if typed.strip():
                args[name] = menu.parse_value(typed.strip())
        return args

    def _detail(self, ask: _Ask) -> None:
        req = self._fresh(ask)
        write = self.terminal.write
        if req.user_request:
            write(f"{PREFIX}   user asked: {inert(req.user_request)}\n")
        if req.reasoning:
            write(f"{PREFIX}   agent's reasoning: {inert(req.reasoning)}\n")
        for action in req.action_requests:
            write(f"{PREFIX}   rule {inert(action.rule)}")
            write(f" — {inert(action.reason)}\n" if action.reason else "\n")
            if action.intent:
                write(
                    f"{PREFIX}   intent check (model output): "
                    f"{inert(str(action.intent.get('verdict')))} — "
                    f"{inert(str(action.intent.get('reason', '')))}\n"
                )

    def _send(self, ask: _Ask, decisions: list[dict[str, Any]], principal: str) -> bool:
        """Decide on the gate's loop; True once the prompt is done with this request."""
        work = ask.gate.adecide(ask.request.id, decisions, approver=principal, channel="console")
        try:
            req = asyncio.run_coroutine_threadsafe(work, ask.loop).result()
        except SignoffError as exc:
            if not self._fresh(ask).pending:
                raise Withdrawn from None
            self.terminal.write(f"{PREFIX}   refused: {inert(str(exc))}\n")
            return False
        del req  # the channel's `resolved` prints the outcome line
        return True

    def _drain_wake(self) -> None:
        while select.select([self._wake_r], [], [], 0)[0]:
            os.read(self._wake_r, 64)

    def _fresh(self, ask: _Ask) -> ApprovalRequest:
        return asyncio.run_coroutine_threadsafe(ask.gate.get(ask.request.id), ask.loop).result()

    def _line(self) -> str:
        """The next line typed; raises :class:`Withdrawn` when the request was decided
        elsewhere first."""
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([self.terminal.read_fd, self._wake_r], [], [])
            if self._wake_r in ready:
                self._drain_wake()
                current = self._current
                if current is None or not self._fresh(current).pending:
                    raise Withdrawn
                continue
            chunk = os.read(self.terminal.read_fd, 4096)
            if not chunk:
                raise EOFError("the terminal closed")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", "replace").rstrip("\r")


#: Finds the terminal to ask on: a :class:`Terminal`, or why there is none (None: "not a
#: terminal").
Opener = Callable[[], Terminal | str | None]


def stdio_terminal() -> Terminal | None:
    """The agent's own terminal: standard input and standard error, when both are TTYs."""
    terminal = Terminal(0, 2)
    return terminal if terminal.is_tty() else None


def dev_tty() -> Terminal | str:
    """``/dev/tty`` (``signoff mcp-proxy --prompt-tty``): never the MCP stdio stream. A
    process without a controlling terminal has none — an MCP client that starts its servers
    in a new session (the Python SDK's stdio client does) leaves them without one."""
    try:
        terminal = Terminal.open("/dev/tty")
    except OSError as exc:
        return (
            f"no controlling terminal to ask on (/dev/tty: {exc.strerror}; the MCP client "
            "may have started this process in a new session)"
        )
    if not terminal.is_tty():
        terminal.close()
        return "/dev/tty is not a terminal"
    return terminal
