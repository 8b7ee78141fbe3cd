"""Progress notifications for one inbound request: heartbeats while a human is asked, then
the upstream's own progress.

Why heartbeats: clients time tool calls out (the TypeScript SDK after 60 s unless progress
resets the clock), and a held call with no sign of life looks hung. Each heartbeat carries
the request id and where to answer — in the text, and in ``_meta`` for clients that render
it — so neither the wait nor the link gets lost.

Progress values must increase within a request, so the upstream's values are shifted past
the heartbeats already sent (an un-held call passes them through unchanged).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext

log = logging.getLogger("signoff.mcp")


def progress_token(ctx: ServerRequestContext[Any, Any]) -> str | int | None:
    """The caller's progress token, when it asked for progress over JSON-RPC."""
    meta: Mapping[str, Any] = ctx.meta or {}
    token = meta.get("progress_token", meta.get("progressToken"))
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None


class ProgressChannel:
    """Sends ``notifications/progress`` for the request ``ctx`` is handling."""

    def __init__(self, ctx: ServerRequestContext[Any, Any]) -> None:
        self.ctx = ctx
        self.token = progress_token(ctx)
        self.sent = 0.0
        self._base = 0.0

    async def beat(self, message: str, meta: dict[str, Any] | None = None) -> None:
        """One heartbeat (progress goes up by one)."""
        self.sent += 1
        await self._emit(self.sent, None, message, meta)

    def start_relay(self) -> None:
        """From now on, relayed upstream progress continues after the heartbeats."""
        self._base = self.sent

    async def relay(self, progress: float, total: float | None, message: str | None) -> None:
        """Forward one progress update from the upstream."""
        value = self._base + progress
        self.sent = max(self.sent, value)
        await self._emit(value, None if total is None else self._base + total, message, None)

    async def _emit(
        self, progress: float, total: float | None, message: str | None, meta: dict[str, Any] | None
    ) -> None:
        try:
            if self.token is not None and meta:
                params = types.ProgressNotificationParams(
                    progress_token=self.token,
                    progress=progress,
                    total=total,
                    message=message,
                    _meta=meta,
                )
                await self.ctx.session.send_notification(
                    types.ProgressNotification(params=params),
                    related_request_id=self.ctx.request_id,
                )
            else:
                # No token (the in-process direct dispatcher) or nothing extra: the SDK's own
                # path, which also works where progress is a direct callback.
                await self.ctx.session.report_progress(progress, total, message)
        except Exception as exc:  # a lost progress note must never fail the call
            log.debug("progress notification not sent: %s", exc)


async def heartbeat(
    channel: ProgressChannel,
    every: float,
    message: Callable[[], str],
    meta: dict[str, Any] | None = None,
) -> None:
    """Beat now, then every ``every`` seconds until cancelled."""
    while True:
        await channel.beat(message(), meta)
        await anyio.sleep(every)
