"""Non-interactive runs: what a call that needs a human gets when nobody can answer.

The request is stored and audited as always, then resolved at once by the system actor
``non-interactive`` (see ``gate.non_interactive`` in :mod:`signoff.gate.settings`):

* a shell tool's command is approved when every segment starts with an allow-listed command
  and nothing in it can run or redirect anything else (:mod:`signoff.checks.shell`, the
  contract of deepagents' CLI), and rejected with the reason otherwise;
* any other tool call is rejected (``non_shell: reject``, the default) or approved
  (``non_shell: approve``, what deepagents' CLI does);
* a question (an inquiry) always gets "no human is available".

Only calls the policy sent to a human get here: a deny stays a deny.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from signoff.checks.shell import check_command
from signoff.gate.messages import NO_HUMAN
from signoff.gate.settings import NonInteractiveSettings
from signoff.model import ApprovalRequest, CallState, utcnow
from signoff.model.resolution import SystemOutcome, system_resolve

if TYPE_CHECKING:
    from signoff.gate.core import Gate

ACTOR: Final = "non-interactive"


def outcome(call: CallState, settings: NonInteractiveSettings) -> SystemOutcome:
    """Approve or reject one tool call in a non-interactive run, with the reason."""
    name = call.action.name
    if name in settings.shell_tools:
        commands = settings.commands
        if not commands:
            return "rejected", NO_HUMAN
        check = check_command(call.action.args.get(settings.command_arg), commands)
        if check.allowed:
            return "approved", "approved in non-interactive mode: every command is allow-listed"
        return "rejected", (
            f"shell command refused in non-interactive mode: {check.reason}. "
            f"Allowed commands: {commands}"
        )
    if settings.non_shell == "approve":
        return "approved", "approved in non-interactive mode (non_shell: approve)"
    return "rejected", NO_HUMAN


async def resolve(gate: Gate, request: ApprovalRequest) -> ApprovalRequest:
    """Resolve every call of ``request`` at once, as the ``non-interactive`` actor."""
    settings = gate.settings.non_interactive
    tool_calls = request.kind == "tool_call"

    def per_call(call: CallState) -> SystemOutcome | None:
        return outcome(call, settings) if tool_calls else None

    tr = await gate.update(
        request.id,
        lambda r: system_resolve(
            r, "rejected", actor=ACTOR, message=NO_HUMAN, now=utcnow(), outcomes=per_call
        ),
    )
    return tr.request


__all__ = ["ACTOR", "outcome", "resolve"]
