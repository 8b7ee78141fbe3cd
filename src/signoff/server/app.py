"""The ASGI app: REST API, web inbox, one-click links, SSE, metrics — around one Gate.

``create_app(gate)`` builds it; start-up opens the store (running its migrations), starts
the gate's expiry sweeper, opens the server's own tables and subscribes the SSE hub to the
store; with ``audit.anchor`` set it also writes signed checkpoints of the audit log
(:mod:`signoff.audit`), the last one at shutdown. Shutdown ends event streams and answers
waiting long-polls first, so uvicorn's graceful shutdown is not held up by clients that would
otherwise wait up to a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from importlib.resources import files

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from signoff.audit import Anchorer
from signoff.gate import Gate
from signoff.model import SignoffError
from signoff.server import (
    api_audit,
    api_events,
    api_grants,
    api_me,
    api_requests,
    hooks,
    inbox,
    inbox_grants,
    links,
    ops,
    signin,
)
from signoff.server.client_limits import ClientLimits
from signoff.server.db import server_db_for
from signoff.server.errors import (
    ApiError,
    handle_api_error,
    handle_http_exception,
    handle_internal_error,
    handle_signoff_error,
)
from signoff.server.events import EventHub
from signoff.server.hot_routes import HotRoutes
from signoff.server.identity import Authenticator
from signoff.server.metrics import Metrics, count_channel_failures
from signoff.server.pages import make_templates
from signoff.server.records import ServerDB
from signoff.server.settings import ServerSettings
from signoff.server.state import ServerState

log = logging.getLogger("signoff.server")
MAX_BODY = 1024 * 1024


def create_app(
    gate: Gate,
    settings: ServerSettings | None = None,
    *,
    db: ServerDB | None = None,
    owns_gate: bool = False,
    public_url: str | None = None,
) -> Starlette:
    """The server for ``gate``; ``owns_gate`` closes the gate when the app shuts down."""
    if settings is None:
        with gate.policy.locating():  # a bad `serve:`/`auth:` key, with its line in the file
            settings = ServerSettings.from_sections(gate.policy.sections)
    db = db or server_db_for(gate.store)
    metrics = Metrics()
    state = ServerState(
        gate=gate,
        settings=settings,
        db=db,
        auth=Authenticator(db, gate.policy, settings.auth),
        hub=EventHub(gate.store),
        metrics=metrics,
        templates=make_templates(),
        owns_gate=owns_gate,
        public_url=public_url or settings.serve.public_url,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state.stopping = asyncio.Event()
        await gate.astart()
        await db.open()
        state.secret = await db.secret()
        count_channel_failures(gate, metrics)
        state.hub.start()
        anchorer = Anchorer.from_policy(gate.store, gate.policy)  # audit.anchor: checkpoints
        if anchorer is not None:
            anchorer.start()
        log.info("signoff server ready", extra={"store": gate.store.url})
        try:
            yield
        finally:
            stop(app)
            if anchorer is not None:
                await anchorer.stop()  # the last checkpoint, at shutdown
            await db.close()
            if owns_gate:
                await gate.aclose()

    handlers = {
        ApiError: handle_api_error,
        SignoffError: handle_signoff_error,
        HTTPException: handle_http_exception,
    }
    app = Starlette(
        routes=[
            *api_requests.routes,
            *api_grants.routes,
            *api_me.routes,
            *api_events.routes,
            *api_audit.routes,
            *ops.routes,
            *signin.routes,
            *inbox.routes,
            *inbox_grants.routes,
            *links.routes,
            *hooks.routes,
            Mount(
                "/static",
                app=StaticFiles(directory=str(files("signoff.server").joinpath("static"))),
                name="static",
            ),
        ],
        exception_handlers={**handlers, Exception: handle_internal_error},
        middleware=[
            Middleware(
                ClientLimits,
                body_timeout=settings.serve.body_timeout,
                max_header_bytes=settings.serve.max_header_bytes,
                max_body_bytes=MAX_BODY,
            ),
            # inside the limits: submit, wait and decide skip the router (hot_routes.py)
            Middleware(
                HotRoutes,
                submit=api_requests.submit,
                wait=api_requests.wait,
                decide=api_requests.post_decisions,
                handlers=handlers,
            ),
        ],
        lifespan=lifespan,
    )
    app.state.signoff = state
    app.state.links = links.LinkIssuer(state)
    hooks.attach(app)
    return app


def stop(app: Starlette) -> None:
    """Begin shutting down: end SSE streams and answer long-polls now. Call on the app's loop."""
    state: ServerState = app.state.signoff
    state.stopping.set()
    for waiter in list(state.long_polls):
        waiter.cancel()
    state.hub.close()
