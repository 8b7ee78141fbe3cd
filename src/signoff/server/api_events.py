"""``GET /v1/events``: Server-Sent Events of created / decided / escalated / expired /
cancelled requests, filtered to what the caller may see (see :mod:`.access`)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from signoff.model import ApprovalRequest
from signoff.server.access import may_see
from signoff.server.state import state_of

PING_SECONDS = 15


async def events(request: Request) -> Response:
    state = state_of(request)
    who = await state.auth.require(request)

    def accepts(req: ApprovalRequest) -> bool:
        return may_see(who, req)

    async def stream() -> AsyncIterator[ServerSentEvent]:
        state.metrics.sse_clients += 1
        try:
            yield ServerSentEvent(comment="connected", retry=2000)
            async for seq, data in state.hub.stream(accepts):
                yield ServerSentEvent(data=json.dumps(data), event=data["type"], id=str(seq))
        finally:
            state.metrics.sse_clients -= 1

    headers: dict[str, Any] = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return EventSourceResponse(stream(), ping=PING_SECONDS, headers=headers)


routes = [Route("/v1/events", events, methods=["GET"])]
