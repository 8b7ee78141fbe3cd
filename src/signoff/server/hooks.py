"""Inbound channel callbacks: ``POST /hooks/slack``, ``/hooks/discord``, ``/hooks/line``,
``/hooks/telegram``, ``/hooks/feishu``, ``/hooks/dingtalk``, ``/hooks/webhook``.

The routes only carry bytes: each channel module verifies its provider's signature on the
raw body, identifies the approver and decides through the gate (see
:class:`signoff.channels.Receiver`). A channel that is not configured answers 404.
:func:`attach` hands the gate's delivery worker the server's link issuer and public URL,
and refuses to start when a configured channel's secrets are missing from the environment.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from signoff.channels import Inbound, Receiver
from signoff.channels.delivery import Delivery
from signoff.model import PolicyError
from signoff.server.state import ServerState, state_of


def attach(app: Starlette) -> None:
    """Give the gate's outbox worker one-click links and the server's URL."""
    state: ServerState = app.state.signoff
    delivery = _delivery(state)
    if delivery is None:
        return
    missing = delivery.missing()
    if missing:
        raise PolicyError(
            "; ".join(f"{name}: {why}" for name, why in sorted(missing.items())),
            path="channels",
        )
    delivery.use_links(app.state.links, state.base_url)


def _delivery(state: ServerState) -> Delivery | None:
    """The gate's outbox worker, when its messengers are signoff's own channels."""
    delivery = state.gate.delivery
    return delivery if isinstance(delivery, Delivery) else None


def _receiver(state: ServerState, name: str) -> Receiver | None:
    delivery = _delivery(state)
    return delivery.receiver(name) if delivery is not None else None


def _hook(name: str) -> Any:
    async def endpoint(request: Request) -> Response:
        state = state_of(request)
        receiver = _receiver(state, name)
        if receiver is None:
            return JSONResponse({"error": f"the {name} channel is not configured"}, 404)
        inbound = Inbound(
            # Signature headers are ASCII; a value that is not cannot be genuine, and
            # dropping it makes verification fail with a 401 rather than a 500.
            headers={k.lower(): v for k, v in request.headers.items() if v.isascii()},
            body=await request.body(),
            now=time.time(),
        )
        reply = await receiver.receive(inbound, state.gate)
        if reply.body is None:
            return Response(status_code=reply.status)
        if isinstance(reply.body, str):
            return PlainTextResponse(reply.body, reply.status)
        return JSONResponse(reply.body, reply.status)

    endpoint.__name__ = f"{name}_hook"
    return endpoint


routes = [
    Route("/hooks/slack", _hook("slack"), methods=["POST"]),
    Route("/hooks/discord", _hook("discord"), methods=["POST"]),
    Route("/hooks/line", _hook("line"), methods=["POST"]),
    Route("/hooks/telegram", _hook("telegram"), methods=["POST"]),
    Route("/hooks/feishu", _hook("feishu"), methods=["POST"]),
    Route("/hooks/dingtalk", _hook("dingtalk"), methods=["POST"]),
    Route("/hooks/webhook", _hook("webhooks"), methods=["POST"]),
]
