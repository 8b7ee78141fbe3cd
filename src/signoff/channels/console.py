"""The console channel: one line per request and per outcome on the terminal (development).

An in-process :class:`~signoff.channels.Channel` — nothing to retry, nothing to verify.
Arguments are redacted like in any chat message; the line says how to decide.

With ``interactive: true`` the agent's own terminal also asks its person (the principal)
where the rule lets them decide (:mod:`signoff.channels.console_prompt`); without a TTY that
part disables itself with one log line.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, TextIO

from signoff.channels import message
from signoff.channels.console_prompt import (
    Opener,
    Terminal,
    TerminalPrompt,
    dev_tty,
    stdio_terminal,
)
from signoff.channels.redact import Redactor
from signoff.model import ApprovalRequest

if TYPE_CHECKING:
    from signoff.channels.config import ConsoleConfig
    from signoff.channels.host import GateHandle
    from signoff.policy import Policy


class ConsoleChannel:
    """Prints ``[signoff] Approval needed: …`` and ``[signoff] req_… ✅ Approved by …``."""

    name = "console"

    def __init__(
        self,
        config: ConsoleConfig | None = None,
        stream: TextIO | None = None,
        *,
        terminal: Opener = stdio_terminal,
    ) -> None:
        self._stream = stream
        self._which = config.stream if config is not None else "stderr"
        self.prompt: TerminalPrompt | None = None
        if config is not None and config.interactive:
            found = terminal()
            if isinstance(found, Terminal):
                self.prompt = TerminalPrompt(found)
            else:
                logging.getLogger("signoff.channels.console").warning(
                    "console channel: %s, the interactive prompt is off", found or "not a terminal"
                )

    @property
    def stream(self) -> TextIO:
        if self._stream is not None:
            return self._stream
        return sys.stdout if self._which == "stdout" else sys.stderr

    async def notify(self, request: ApprovalRequest, gate: GateHandle) -> None:
        if self.prompt is not None:
            self.prompt.offer(request, gate)  # it shows the request when its turn comes
            return
        redact = Redactor.from_policy(gate.policy)
        text = message.question(request) or "; ".join(message.call_lines(request, redact))
        self._write(
            f"[signoff] {message.title(request)} ({request.id}): {text}\n"
            f"[signoff]   {message.context_line(request)}\n"
            f"[signoff]   {message.cli_hint(request)}"
        )

    async def resolved(self, request: ApprovalRequest, gate: GateHandle) -> None:
        if self.prompt is not None:
            self.prompt.changed(request)
        self._write(f"[signoff] {request.id}: {message.outcome(request)}")

    def _write(self, text: str) -> None:
        if self.prompt is not None:  # the terminal that asks also hears how it ended
            self.prompt.terminal.write(text + "\n")
            return
        print(text, file=self.stream, flush=True)


def for_mcp(policy: Policy, *, prompt_tty: bool) -> list[ConsoleChannel]:
    """The console channel as ``signoff mcp-proxy`` / ``inquiry-server`` run it: the MCP
    client's own UI owns the terminal, so the interactive prompt is off unless
    ``--prompt-tty`` asks for it, and then it uses ``/dev/tty`` — never the MCP stdio stream.
    (Passed to the gate, it replaces the policy's ``console`` channel.)"""
    from signoff.channels.config import ConsoleConfig, parse

    section = policy.sections.get("channels") or {}
    configured = parse(section).console if section else None
    if configured is None and not prompt_tty:
        return []
    base = configured or ConsoleConfig()
    config = base.model_copy(update={"interactive": prompt_tty})
    return [ConsoleChannel(config, terminal=dev_tty)]
