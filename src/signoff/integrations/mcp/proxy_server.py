"""The proxy as one low-level MCP server: lifespan, handlers, capability mirroring.

The server declares to its client what the upstreams declared (tools always, since the
proxy gates them): the ``initialize`` result is rewritten with the session's mirrored
capabilities once the session's upstreams are connected — with the capabilities *this*
client declared, which is what the proxy declares to them — and ``server/discover``
(2026-07-28) answers from the shared session.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from signoff import __version__
from signoff.gate import Gate
from signoff.integrations.mcp import passthrough
from signoff.integrations.mcp.catalog import mirror
from signoff.integrations.mcp.listening import SubscribingListen
from signoff.integrations.mcp.pool import UpstreamPool
from signoff.integrations.mcp.proxy import ApprovalProxy, ProxyOptions
from signoff.integrations.mcp.relay import Downstream
from signoff.integrations.mcp.sealed import SealedStates
from signoff.integrations.mcp.serving import serves_one_session
from signoff.integrations.mcp.sessions import SHARED, ProxySession, SessionHub
from signoff.integrations.mcp.upstreams import UpstreamSpec, check_names

log = logging.getLogger("signoff.mcp")

INSTRUCTIONS = (
    "Tools behind this server need human sign-off for some calls; a call may wait for "
    "approval. Rejections and timeouts come back as tool errors with a reason: do not retry "
    "those calls unchanged."
)

Ctx = ServerRequestContext[SessionHub, Any]


class _SessionOnInitialize:
    """Opens the client's session while it initializes (its capabilities are known then),
    and answers with the capabilities mirrored from that session's upstreams."""

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method != "initialize" or ctx.request_id is None:
            return await call_next(ctx)
        try:
            params = types.InitializeRequestParams.model_validate(ctx.params or {}, by_name=False)
        except ValueError:
            return await call_next(ctx)  # the SDK answers a malformed initialize itself
        hub: SessionHub = ctx.lifespan_context
        session = await hub.open(ctx, params.capabilities, params.client_info)
        result = await call_next(ctx)
        if isinstance(result, dict):
            caps = mirror(session.pool.links, modern=False)
            result["capabilities"] = caps.model_dump(by_alias=True, mode="json", exclude_none=True)
        return result


def build_proxy(
    gate: Gate, upstreams: Sequence[UpstreamSpec], options: ProxyOptions | None = None
) -> Server[SessionHub]:
    """The proxy as a low-level MCP server; serve it over stdio, HTTP or in memory."""
    opts = options or ProxyOptions()
    check_names(upstreams)
    sealed = SealedStates(audience=opts.name, keys=opts.state_keys)

    def make_pool(
        downstream: Downstream, caps: types.ClientCapabilities | None, info: Any
    ) -> UpstreamPool:
        return UpstreamPool(
            upstreams,
            downstream,
            client_caps=caps,
            client_info=info,
            mode=opts.upstream_mode,
            connect_timeout=opts.connect_timeout_s,
            restarts=opts.upstream_restarts,
            ttl=opts.listing_ttl_s,
        )

    live: list[SessionHub] = []  # the running hub, for the SDK's input-schema lookup
    bus = InMemorySubscriptionBus()  # upstream change events → 2026-07-28 listen streams

    def make_proxy(session: ProxySession) -> ApprovalProxy:
        return ApprovalProxy(gate, session.pool, opts, sealed, thread=session.thread)

    @asynccontextmanager
    async def lifespan(srv: Server[SessionHub]) -> AsyncIterator[SessionHub]:
        try:
            await gate.astart()
        except Exception as exc:  # serve anyway: gated calls are then refused with a reason
            log.error(
                "the store cannot be opened (%s); calls needing approval will be refused", exc
            )
        async with anyio.create_task_group() as tg:
            hub = SessionHub(
                tg,
                make_pool,
                make_proxy,
                per_session=opts.per_session,
                max_sessions=opts.max_sessions,
                bus=bus,
            )
            if opts.per_session:  # HTTP: start the shared upstreams now, so a bad one stops us
                await hub.open(None, None, None)
            live.append(hub)
            try:
                yield hub
            finally:
                live.remove(hub)
                await hub.aclose()
                tg.cancel_scope.cancel()

    async def on_list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        proxy = await _proxy(ctx)
        return types.ListToolsResult(tools=await proxy.list_tools())

    async def on_call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> Any:
        session = await ctx.lifespan_context.session_for(ctx)
        with session.pool.downstream.serving(ctx):
            return await session.proxy.call_tool(ctx, params)

    async def on_discover(ctx: Ctx, params: types.RequestParams | None) -> Any:
        session = await ctx.lifespan_context.session_for(ctx)
        return types.DiscoverResult(
            supported_versions=list(MODERN_PROTOCOL_VERSIONS),
            capabilities=mirror(session.pool.links, modern=True),
            instructions=INSTRUCTIONS,
        )

    def listed_schema(name: str) -> Mapping[str, Any] | None:
        """From the listing cache: a 2026 HTTP ``tools/call`` costs no extra listing."""
        shared = live[-1].sessions.get(SHARED) if live else None
        return shared.pool.input_schema(name) if shared is not None else None

    input_schema = HeaderSchemas(listed_schema)

    server: Server[SessionHub] = Server(
        opts.name,
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        get_tool_input_schema=input_schema,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        on_subscriptions_listen=SubscribingListen(ListenHandler(bus)),
    )
    server.add_request_handler("server/discover", types.RequestParams, on_discover)
    passthrough.register(server)
    server.middleware.append(_SessionOnInitialize())
    server.middleware.append(sealed.boundary)
    if not opts.per_session:
        serves_one_session(server)
    return server


class HeaderSchemas:
    """The SDK's ``get_tool_input_schema``: a tool's input schema where it declares
    ``Mcp-Param-*`` headers, None at once where it declares none.

    On every 2026-07-28 HTTP ``tools/call`` with arguments the SDK checks the request's
    ``Mcp-Param-*`` headers against the called tool's schema — two walks over the schema and
    a pass over the request's headers. A schema without a valid ``x-mcp-header`` annotation
    validates nothing (the SDK's own rule: an invalid annotation disables the check, as
    conforming clients drop such tools), so answering None for it changes no outcome; the
    answer is kept per tool for as long as the listing holds the same schema object.
    """

    def __init__(self, lookup: Callable[[str], Mapping[str, Any] | None]) -> None:
        self._lookup = lookup
        self._known: dict[str, tuple[Mapping[str, Any], bool]] = {}

    def __call__(self, name: str) -> Mapping[str, Any] | None:
        schema = self._lookup(name)
        if schema is None:
            return None
        known = self._known.get(name)
        if known is None or known[0] is not schema:  # a new listing: judge its schema again
            known = self._known[name] = (schema, declares_headers(schema))
        return schema if known[1] else None


def declares_headers(schema: Mapping[str, Any]) -> bool:
    """Whether ``schema`` has ``x-mcp-header`` annotations the SDK would check."""
    return find_invalid_x_mcp_header(schema) is None and bool(x_mcp_header_map(schema))


async def _proxy(ctx: Ctx) -> ApprovalProxy:
    session = await ctx.lifespan_context.session_for(ctx)
    proxy: ApprovalProxy = session.proxy
    return proxy
