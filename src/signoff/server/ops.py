"""Operations endpoints: ``/healthz``, ``/metrics`` (Prometheus), ``/openapi.json``.

They need no credentials: health and counts only, no names, arguments or ids. With
``serve.metrics_token`` set, ``/metrics`` wants ``Authorization: Bearer <that token>``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from signoff.server.csrf import same_secret
from signoff.server.errors import unauthorized
from signoff.server.openapi import openapi_document
from signoff.server.state import state_of


async def healthz(request: Request) -> Response:
    state = state_of(request)
    try:
        await state.gate.store.next_due_at()
    except Exception as exc:  # any store trouble means "do not send traffic here"
        return JSONResponse(
            {"status": "unavailable", "message": f"the store is unavailable: {type(exc).__name__}"},
            status_code=503,
        )
    return JSONResponse({"status": "ok"})


async def metrics(request: Request) -> Response:
    state = state_of(request)
    counts = await state.metrics.counts.get(state.gate.store)
    delivery = getattr(state.gate, "delivery", None)
    failures = getattr(delivery, "failed_by_channel", None)
    return PlainTextResponse(
        state.metrics.render(
            counts, failures, state.gate.intents.counts, state.gate.intents.cache_hits
        ),
        media_type="text/plain; version=0.0.4; charset=utf-8",
    )


async def openapi(request: Request) -> Response:
    state = state_of(request)
    return JSONResponse(
        openapi_document(state.base_url(request), state.settings.serve.long_poll_max)
    )


Endpoint = Callable[[Request], Awaitable[Response]]


def metrics_token_required(endpoint: Endpoint) -> Endpoint:
    """``endpoint`` behind ``serve.metrics_token`` when one is configured."""

    @functools.wraps(endpoint)
    async def guarded(request: Request) -> Response:
        token = state_of(request).settings.serve.metrics_token
        if token is not None:
            scheme, _, presented = request.headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not same_secret(token, presented.strip()):
                raise unauthorized("/metrics needs `Authorization: Bearer <serve.metrics_token>`")
        return await endpoint(request)

    return guarded


routes = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/metrics", metrics_token_required(metrics), methods=["GET"]),
    Route("/openapi.json", openapi, methods=["GET"]),
]
