"""The three timeout tiers: MCP client wait > signoff request deadline > UI "no answer" timer.

A client that gives up before the deadline cuts a held call off while a human may still be
deciding (the proxy then withdraws the request, so nothing runs late — but the agent lost the
call). The commands warn at start when the tiers are the wrong way round.
"""

from __future__ import annotations

import logging
import os

from signoff.model import ApprovalRequest, utcnow
from signoff.policy import Policy

log = logging.getLogger("signoff.mcp")

#: Claude Code's per-tool timeout, in milliseconds (also read by some other clients).
CLIENT_TIMEOUT_ENV = "MCP_TOOL_TIMEOUT"


def client_wait_s(flag: float | None) -> float | None:
    """The client's tool-call wait: ``--client-timeout``, else ``$MCP_TOOL_TIMEOUT`` (ms)."""
    if flag is not None:
        return flag
    raw = os.environ.get(CLIENT_TIMEOUT_ENV, "").strip()
    try:
        return float(raw) / 1000.0 if raw else None
    except ValueError:
        return None


def longest_deadline(policy: Policy) -> float:
    """The longest time a request of this policy can stay open (an escalation adds its
    timeout once more).

    Reads the compiled entries directly: ``Policy`` has no public listing of its review
    specs yet (a ``Policy.review_specs()`` would replace this).
    """
    entries = [*policy._exact.values(), *policy._globs]
    outcomes = [policy._unknown, policy._on_error]
    for entry in entries:
        outcomes.extend(rule.outcome for rule in entry.rules)
        outcomes.append(entry.default)
        if entry.floor is not None:
            outcomes.append(entry.floor)
    longest = 0.0
    for outcome in outcomes:
        if outcome.kind != "require_approval":
            continue
        spec = outcome.spec
        longest = max(longest, spec.timeout_s * (2 if spec.on_timeout == "escalate" else 1))
    return longest


def tier_warning(client_wait: float | None, deadline: float) -> str | None:
    """A warning when the client may give up before the deadline (None when fine)."""
    if deadline <= 0:
        return None
    if client_wait is None:
        return (
            f"a call may wait up to {deadline:.0f} s for a human; make sure the MCP client "
            f"waits longer for a tool call (e.g. Claude Code: {CLIENT_TIMEOUT_ENV}="
            f"{int(deadline * 1000) + 60_000}), or pass --client-timeout to check it"
        )
    if client_wait <= deadline:
        return (
            f"the MCP client gives up on a tool call after {client_wait:.0f} s, but a request "
            f"may stay open for {deadline:.0f} s: raise the client's timeout above the "
            "deadline (docs/mcp.md) or shorten the policy's `timeout:`; a call cut off by the "
            "client is withdrawn and never runs"
        )
    return None


def warn_if_client_gives_up_first(req: ApprovalRequest, client_wait: float) -> bool:
    """Log once a held request may outlive the client's wait; True when it warned."""
    left = (req.expires_at - utcnow()).total_seconds()
    if left < client_wait:
        return False
    log.warning(
        "request %s may stay open %.0f s but the client gives up after %.0f s; raise the "
        "client's tool timeout above the policy's timeout",
        req.id,
        left,
        client_wait,
    )
    return True
