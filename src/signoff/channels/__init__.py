"""Outbound notifications to approvers, and (later) verified inbound callbacks.

A channel is one module implementing :class:`Channel`. This package holds the contract and
the built-in log channel; Slack, Discord, email, LINE, webhooks and Teams arrive as modules
beside it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from signoff.model import ApprovalRequest

if TYPE_CHECKING:
    from signoff.gate import Gate


@runtime_checkable
class Channel(Protocol):
    """Tell approvers about a request, and update them when it resolves.

    ``notify`` raising is audited as ``notification_failed``; the request stays pending
    (the tool never runs because a channel failed — it just waits for another channel).
    """

    name: str

    async def notify(self, request: ApprovalRequest, gate: Gate) -> None: ...

    async def resolved(self, request: ApprovalRequest, gate: Gate) -> None: ...


class LogChannel:
    """Writes one line per request to the ``signoff.notify`` logger (development)."""

    name = "log"

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.log = logger or logging.getLogger("signoff.notify")

    async def notify(self, request: ApprovalRequest, gate: Gate) -> None:
        tools = ", ".join(a.name for a in request.action_requests)
        self.log.info(
            "approval needed: %s (%s) on thread %s — `signoff show %s`",
            request.id,
            tools,
            request.thread,
            request.id,
        )

    async def resolved(self, request: ApprovalRequest, gate: Gate) -> None:
        self.log.info("request %s %s", request.id, request.status)


__all__ = ["Channel", "LogChannel"]
