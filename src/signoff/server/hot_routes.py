"""The three requests of every approval cycle, dispatched without Starlette's router.

An agent submits (``POST /v1/requests``) and long-polls (``GET /v1/requests/{id}/wait``); an
approver decides (``POST /v1/requests/{id}/decisions``). :class:`HotRoutes` sits inside
:class:`~signoff.server.client_limits.ClientLimits` (so the head, body-size and body-time
limits apply unchanged) and hands exactly these method + path pairs to their handlers — the
same functions the router lists — skipping the exception middleware, the walk over every
route and the per-route exception wrapper. Anything else (another method on these paths,
HEAD, a path with a ``root_path``) goes to the router as before, so its 404/405 answers do
not change.

Errors take the app's own exception handlers (``ApiError``, ``SignoffError``,
``HTTPException``: the same JSON bodies); anything else propagates to Starlette's
``ServerErrorMiddleware`` outside, which answers 500 as for every other route.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

Endpoint = Callable[[Request], Awaitable[Response]]
ErrorHandler = Callable[[Request, Exception], Awaitable[Response]]

REQUESTS = "/v1/requests"
_PREFIX = REQUESTS + "/"


class HotRoutes:
    """ASGI middleware: submit, wait and decide go straight to their handlers."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        submit: Endpoint,
        wait: Endpoint,
        decide: Endpoint,
        handlers: Mapping[type[Exception], ErrorHandler],
    ) -> None:
        self.app = app
        self.submit = submit
        self.suffixes: dict[tuple[str, str], Endpoint] = {
            ("GET", "/wait"): wait,
            ("POST", "/decisions"): decide,
        }
        self.handlers = dict(handlers)

    def endpoint(self, scope: Scope) -> tuple[Endpoint, str | None] | None:
        """The handler and the request id for a hot route, else None (the router's turn)."""
        if scope["type"] != "http" or scope.get("root_path"):
            return None
        path: str = scope["path"]
        method: str = scope["method"]
        if path == REQUESTS:
            return (self.submit, None) if method == "POST" else None
        if not path.startswith(_PREFIX):
            return None
        request_id, _, tail = path[len(_PREFIX) :].partition("/")
        endpoint = self.suffixes.get((method, "/" + tail))
        # the router's `{id}` is `[^/]+`: one non-empty segment
        if endpoint is None or not request_id:
            return None
        return endpoint, request_id

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = self.endpoint(scope)
        if found is None:
            await self.app(scope, receive, send)
            return
        endpoint, request_id = found
        scope["endpoint"] = endpoint
        scope["path_params"] = {} if request_id is None else {"id": request_id}
        request = Request(scope, receive, send)
        try:
            response = await endpoint(request)
        except Exception as exc:
            handler = self._handler_for(exc)
            if handler is None:
                raise  # ServerErrorMiddleware: the 500 every route gives
            response = await handler(request, exc)
            exc.__traceback__ = None  # as Starlette does: no tracebacks kept across requests
        await response(scope, receive, send)

    def _handler_for(self, exc: Exception) -> ErrorHandler | None:
        for cls in type(exc).__mro__:
            if cls in self.handlers:
                return self.handlers[cls]
        return None
