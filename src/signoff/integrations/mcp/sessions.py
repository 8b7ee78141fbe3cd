"""One proxy session per client: its thread, its grants, its own upstream connections.

Over stdio there is one client, so one session, opened when the client's first message
arrives — then the client's capabilities are known and are what the proxy declares to the
upstreams. Over HTTP (``per_session``) each 2025-11-25 client session (``Mcp-Session-Id``)
gets its own: thread ``mcp-<session>`` (so a ``--for-thread`` approval given to one client
never covers another's calls), its own upstream processes/connections, at most
``max_sessions`` of them (more are refused with an error naming the flag). 2026-07-28
requests carry no session, so they share one session, opened at start (which is also where
an upstream that cannot start stops the proxy).

A session ends with its client connection (stdio closed, HTTP ``DELETE`` or idle timeout):
its held requests are withdrawn — the handlers are cancelled — and its upstreams closed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from mcp.server import ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.exceptions import MCPError

from signoff.integrations.mcp import elicitation
from signoff.integrations.mcp.pool import UpstreamPool
from signoff.integrations.mcp.relay import Downstream
from signoff.integrations.mcp.upstreams import UpstreamError

log = logging.getLogger("signoff.mcp")

SHARED = "shared"


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection:
    """The client connection a request arrived on.

    The SDK builds a ``Connection`` per client but hands low-level handlers only the
    per-request ``ServerSession`` (its handler ``Context`` with ``.connection`` is not wired
    yet, TODO L54 in ``mcp.server.context``), so this reads the session's reference to it.
    """
    return ctx.session._connection


class ProxySession:
    """A client session's upstream pool and the gating proxy over it."""

    def __init__(self, key: object, pool: UpstreamPool, thread: str | None) -> None:
        self.key = key
        self.pool = pool
        self.thread = thread
        self.closed = anyio.Event()
        self.proxy: Any = None  # the ApprovalProxy, set by the hub's factory


class SessionHub:
    """Every live proxy session of one proxy server (its lifespan state)."""

    def __init__(
        self,
        tg: TaskGroup,
        make_pool: Callable[[Downstream, types.ClientCapabilities | None, Any], UpstreamPool],
        make_proxy: Callable[[ProxySession], Any],
        *,
        per_session: bool,
        max_sessions: int,
        bus: SubscriptionBus | None = None,
    ) -> None:
        self.tg = tg
        self.make_pool = make_pool
        self.make_proxy = make_proxy
        self.per_session = per_session
        self.max_sessions = max_sessions
        self.bus = bus  # 2026-07-28 clients' listen streams: fed by the shared session
        self.sessions: dict[object, ProxySession] = {}
        self._lock = anyio.Lock()
        self.failure: UpstreamError | None = None

    def key_of(self, ctx: ServerRequestContext[Any, Any]) -> object:
        if not self.per_session or elicitation.is_modern(ctx):
            return SHARED
        return connection_of(ctx)

    def find(self, ctx: ServerRequestContext[Any, Any]) -> ProxySession | None:
        return self.sessions.get(self.key_of(ctx))

    async def session_for(self, ctx: ServerRequestContext[Any, Any]) -> ProxySession:
        """The request's session, opened now if it is the first of its connection."""
        found = self.find(ctx)
        if found is not None:
            return found
        caps = ctx.session.client_capabilities
        params = ctx.session.client_params
        return await self.open(ctx, caps, params.client_info if params else None)

    async def open(
        self,
        ctx: ServerRequestContext[Any, Any] | None,
        caps: types.ClientCapabilities | None,
        info: types.Implementation | None,
    ) -> ProxySession:
        """Open the session of ``ctx``'s connection (``None``: the shared one)."""
        key = SHARED if ctx is None else self.key_of(ctx)
        async with self._lock:
            found = self.sessions.get(key)
            if found is not None:
                return found
            if key is not SHARED and self._per_client() >= self.max_sessions:
                raise MCPError(
                    code=types.INVALID_REQUEST,
                    message=f"signoff's MCP proxy already serves {self.max_sessions} client "
                    "sessions (--max-sessions); close one, or start the proxy with a higher "
                    "--max-sessions",
                )
            thread = None
            if key is not SHARED and ctx is not None:
                session_id = connection_of(ctx).session_id
                thread = f"mcp-{session_id}" if session_id else None
            downstream = Downstream(on_changed=lambda up, kind: None)
            if key is SHARED:  # the session 2026-07-28 (sessionless) clients use
                downstream.bus = self.bus
            pool = self.make_pool(downstream, caps, info)
            downstream.on_changed = lambda up, kind: pool.catalog.invalidate(up, kind)
            session = ProxySession(key, pool, thread)
            try:
                await self.tg.start(self._run, session)
            except BaseException as exc:
                failure = _upstream_error(exc)
                if failure is None:
                    raise
                if key is SHARED and not self.per_session:
                    self.failure = failure  # one client only: nothing left to serve, stop
                    self.tg.start_soon(_stop, failure)
                raise MCPError(code=types.INTERNAL_ERROR, message=str(failure)) from None
            session.proxy = self.make_proxy(session)
            self.sessions[key] = session
        if ctx is not None:
            session.pool.downstream.attach(ctx)
            if key is not SHARED:
                connection_of(ctx).exit_stack.push_async_callback(self.close, key)
        return session

    async def close(self, key: object) -> None:
        """End a session: cancel its handlers' holds (done by the SDK) and its upstreams."""
        session = self.sessions.pop(key, None)
        if session is not None:
            session.closed.set()

    async def aclose(self) -> None:
        for key in list(self.sessions):
            await self.close(key)

    async def _run(self, session: ProxySession, *, task_status: Any) -> None:
        async with anyio.create_task_group() as tg:
            await session.pool.start(tg)
            task_status.started()
            await session.closed.wait()
            await session.pool.aclose()
            tg.cancel_scope.cancel()

    def _per_client(self) -> int:
        return sum(1 for key in self.sessions if key is not SHARED)


def _upstream_error(exc: BaseException) -> UpstreamError | None:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, UpstreamError) else None


async def _stop(failure: UpstreamError) -> None:
    raise failure
