"""One proxy session's upstreams: their links, their merged catalog, and calling a tool.

Calling never throws a transport failure at the client: a timeout, a connection that
closed mid-call or an upstream that is down come back as ``isError`` tool results saying
what happened (the upstream's own protocol errors, such as invalid params, pass through).
An upstream on 2026-07-28 that needs input mid-call (``input_required``) has its requests
answered by the real client through the same callbacks as a 2025 push, then the call is
retried — still one upstream request per round.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from mcp.client.session import ClientRequestContext
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

from signoff.integrations.mcp import texts
from signoff.integrations.mcp.catalog import DEFAULT_TTL, Catalog, Route
from signoff.integrations.mcp.link import (
    BACKOFF_ATTEMPTS,
    DEFAULT_CONNECT_TIMEOUT,
    UpstreamLink,
    describe,
    is_connection_lost,
)
from signoff.integrations.mcp.relay import Downstream
from signoff.integrations.mcp.resubscribe import RestartHook, Resubscriptions
from signoff.integrations.mcp.safeguards import refusal
from signoff.integrations.mcp.upstreams import UpstreamSpec, check_names

log = logging.getLogger("signoff.mcp")

#: Rounds of upstream ``input_required`` answered before the call is given up.
MAX_INPUT_ROUNDS = 10


class UpstreamPool:
    """Links to every upstream of one proxy session, the catalog over them, and calls."""

    def __init__(
        self,
        specs: Sequence[UpstreamSpec],
        downstream: Downstream,
        *,
        client_caps: types.ClientCapabilities | None = None,
        client_info: types.Implementation | None = None,
        mode: str = "auto",
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        restarts: int = BACKOFF_ATTEMPTS,
        ttl: float = DEFAULT_TTL,
    ) -> None:
        check_names(specs)
        self.downstream = downstream
        self.links = [
            UpstreamLink(
                spec,
                hooks=downstream.hooks(spec.name, client_caps, client_info),
                mode=mode,
                connect_timeout=connect_timeout,
                restarts=restarts,
                on_restart=self._restarted,
            )
            for spec in specs
        ]
        self.catalog = Catalog(self.links, ttl=ttl)
        #: Subscriptions 2025-11-25 clients made upstream, renewed when an upstream restarts.
        self.subscriptions = Resubscriptions()
        #: More to renew on a restarted upstream (the proxy's own listen subscriptions).
        self.restart_hooks: list[RestartHook] = []

    async def start(self, tg: TaskGroup) -> None:
        """Connect every upstream (raises UpstreamError naming the first that fails)."""
        for link in self.links:
            await tg.start(link.run)

    async def aclose(self) -> None:
        for link in self.links:
            await link.aclose()

    async def _restarted(self, link: UpstreamLink, client: Any) -> None:
        """Before a restarted upstream is used: forget its listing, renew subscriptions."""
        self.catalog.invalidate(link.name)
        await self.subscriptions.renew(link, client)
        for hook in list(self.restart_hooks):
            await hook(link, client)
        log.info("upstream %s is back", link.spec.label)

    def link(self, upstream: str) -> UpstreamLink:
        return self.catalog.links[upstream]

    # ------------------------------------------------------------------ tools
    async def list_tools(self) -> list[types.Tool]:
        return await self.catalog.tools()

    async def route(self, name: str) -> Route | None:
        return await self.catalog.route(name)

    @property
    def tool_names(self) -> list[str]:
        return self.catalog.tool_names

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        """A listed tool's input schema from the cache (no upstream request)."""
        route = self.catalog.cached_route(name)
        return route.listed.input_schema if route is not None else None

    async def call(
        self,
        route: Route,
        args: Mapping[str, Any],
        *,
        progress: ProgressFnT | None = None,
        timeout: float | None = None,
    ) -> types.CallToolResult | dict[str, Any]:
        """Call the upstream tool once. ``timeout`` starts now — after any human decision.

        A result relayed by the lean HTTP leg (:mod:`.lean`) comes back as the upstream's
        JSON object, not validated here: the proxy only forwards it.
        """
        link = self.link(route.upstream)
        shown = route.listed.name
        client = link.client
        if client is None:
            return refusal(texts.upstream_down(shown, link.state.reason or "not connected"))
        session = client.session
        lean = link.lean
        try:
            if lean is not None and lean.http is not None:  # HTTP: the direct leg
                raw = await lean.call_tool(
                    session, route.tool, dict(args), progress=progress, timeout=timeout
                )
                if raw.get("resultType", "complete") == "complete" and "content" in raw:
                    return _raw_without_server_stamp(raw)
                result = _CALL_RESULT.validate_python(raw, by_name=False)
            else:
                result = await session.call_tool(
                    route.tool,
                    dict(args),
                    read_timeout_seconds=timeout,
                    progress_callback=progress,
                    allow_input_required=True,
                )
            for _ in range(MAX_INPUT_ROUNDS):
                if not isinstance(result, types.InputRequiredResult):
                    break
                answers = await self._answer(session, result)
                result = await session.call_tool(
                    route.tool,
                    dict(args),
                    read_timeout_seconds=timeout,
                    progress_callback=progress,
                    input_responses=answers,
                    request_state=result.request_state,
                    allow_input_required=True,
                )
        except MCPError as exc:
            if exc.error.code == types.REQUEST_TIMEOUT:
                return refusal(texts.upstream_timeout(shown, timeout))
            if exc.error.code == types.CONNECTION_CLOSED:
                link.lost("the connection closed during a call")
                return refusal(texts.upstream_lost(shown))
            raise  # the upstream's own protocol error passes through unchanged
        except Exception as exc:
            if is_connection_lost(exc):
                link.lost(describe(exc))
                return refusal(texts.upstream_lost(shown))
            log.warning("upstream call %s failed: %s", shown, describe(exc))
            return refusal(texts.upstream_failed(shown, describe(exc)))
        if not isinstance(result, types.CallToolResult):
            return refusal(texts.upstream_unfinished(shown))
        return _without_server_stamp(result)

    async def _answer(
        self, session: Any, result: types.InputRequiredResult
    ) -> dict[str, types.InputResponse]:
        """Let the real client answer an upstream's input requests (2026-07-28 upstream)."""
        answers: dict[str, types.InputResponse] = {}
        for key, request in (result.input_requests or {}).items():
            ctx = ClientRequestContext(session=session, request_id=key)
            answer = await session.dispatch_input_request(ctx, request)
            if isinstance(answer, types.ErrorData):
                raise MCPError.from_error_data(answer)
            answers[key] = answer
        return answers


async def close_quietly(pool: UpstreamPool) -> None:
    with anyio.CancelScope(shield=True):
        await pool.aclose()


_CALL_RESULT: TypeAdapter[types.CallToolResult | types.InputRequiredResult] = TypeAdapter(
    types.CallToolResult | types.InputRequiredResult
)


def _raw_without_server_stamp(result: dict[str, Any]) -> dict[str, Any]:
    """:func:`_without_server_stamp` for a relayed JSON result, which also gets the
    ``resultType`` a 2026-07-28 client needs when a 2025 upstream sent none."""
    result.setdefault("resultType", "complete")
    meta = result.get("_meta")
    if not isinstance(meta, dict) or types.SERVER_INFO_META_KEY not in meta:
        return result
    kept = {k: v for k, v in meta.items() if k != types.SERVER_INFO_META_KEY}
    return {**result, "_meta": kept} if kept else {k: v for k, v in result.items() if k != "_meta"}


def _without_server_stamp(result: types.CallToolResult) -> types.CallToolResult:
    """The client talks to the proxy: drop the upstream's serverInfo stamp from the result."""
    meta = result.meta
    if not meta or types.SERVER_INFO_META_KEY not in meta:
        return result
    kept = {k: v for k, v in meta.items() if k != types.SERVER_INFO_META_KEY}
    return result.model_copy(update={"meta": kept or None})
