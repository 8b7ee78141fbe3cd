"""``GET /v1/me``: who the credentials belong to (kind, name, roles), so a client such as
``signoff watch --server`` can tell which requests need *this* person."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from signoff.server.api_requests import caller
from signoff.server.state import state_of
from signoff.server.wire import MeOut


async def me(request: Request) -> Response:
    state = state_of(request)
    who = await caller(request, state)
    out = MeOut(kind=who.kind, name=who.name, roles=sorted(who.roles), admin=who.admin)
    return JSONResponse(out.model_dump(mode="json"))


routes = [Route("/v1/me", me, methods=["GET"])]
