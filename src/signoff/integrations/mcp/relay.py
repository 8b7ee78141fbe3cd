"""The real client as upstreams see it: what they may ask of it, and what they tell it.

An upstream's server→client requests (sampling, elicitation, roots) go to the client of the
proxy session that owns the upstream connection, with its answer (or error) back; they ride
the stream of the client request in flight when there is one (so over HTTP they reach the
POST that is waiting), else the session's standalone channel. Upstream notifications — log
messages, ``list_changed`` for tools/resources/prompts, resource updates — are forwarded the
same way, and a ``list_changed`` first invalidates the proxy's cached listing.

Change events (``list_changed``, resource updates) also reach 2026-07-28 clients: those
clients get them only on a ``subscriptions/listen`` stream, which the proxy serves from a
:class:`~mcp.server.subscriptions.SubscriptionBus` the shared session publishes to. From a
2026-07-28 upstream the proxy receives them on a listen stream of its own
(:attr:`ClientHooks.events`).

Only what the client declared is declared to upstreams (:meth:`Downstream.hooks`), so an
upstream never asks for something the client cannot do. A client on 2026-07-28 has no
back channel: an upstream's request then gets an error saying so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import mcp_types as types
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp.server import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
    event_to_notification,
)
from pydantic import BaseModel

from signoff.integrations.mcp.catalog import Kind
from signoff.integrations.mcp.link import ClientHooks

log = logging.getLogger("signoff.mcp")

ResultT = TypeVar("ResultT", bound=BaseModel)

_CHANGED: dict[type[Any], Kind] = {
    types.ToolListChangedNotification: "tools",
    types.PromptListChangedNotification: "prompts",
    types.ResourceListChangedNotification: "resources",
}
_EVENT_KIND: dict[type[Any], Kind] = {
    ToolsListChanged: "tools",
    PromptsListChanged: "prompts",
    ResourcesListChanged: "resources",
}


class Downstream:
    """The client of one proxy session, as a target for upstream traffic."""

    def __init__(self, on_changed: Callable[[str, Kind], None]) -> None:
        self.on_changed = on_changed
        self.standalone: ServerSession | None = None
        #: Where 2026-07-28 clients' listen streams pick up change events (the shared session).
        self.bus: SubscriptionBus | None = None
        self._in_flight: list[ServerRequestContext[Any, Any]] = []

    def attach(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """Remember the session's standalone channel (any request's session reaches it)."""
        if self.standalone is None:
            self.standalone = ctx.session

    @contextmanager
    def serving(self, ctx: ServerRequestContext[Any, Any]) -> Iterator[None]:
        """While ``ctx`` is handled, upstream requests ride its stream."""
        self.attach(ctx)
        self._in_flight.append(ctx)
        try:
            yield
        finally:
            self._in_flight.remove(ctx)

    def hooks(
        self,
        upstream: str,
        caps: types.ClientCapabilities | None,
        info: types.Implementation | None = None,
    ) -> ClientHooks:
        """Client callbacks for upstream ``upstream``: only those the client declared."""
        caps = caps or types.ClientCapabilities()
        return ClientHooks(
            sampling=self._sampling if caps.sampling is not None else None,
            sampling_capabilities=caps.sampling,
            elicitation=self._elicitation if caps.elicitation is not None else None,
            roots=self._roots if caps.roots is not None else None,
            messages=self.for_upstream_messages(upstream),
            events=self.for_upstream_events(upstream),
            client_info=info,
        )

    def for_upstream_messages(self, upstream: str) -> Any:
        async def handle(message: IncomingMessage) -> None:
            await self._notification(upstream, message)

        return handle

    def for_upstream_events(self, upstream: str) -> Any:
        async def handle(event: ServerEvent) -> None:
            await self._event(upstream, event)

        return handle

    # ------------------------------------------------------------------ requests
    async def _sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        request = types.CreateMessageRequest(params=params)
        return await self._ask(request, types.CreateMessageResult)

    async def _elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        return await self._ask(types.ElicitRequest(params=params), types.ElicitResult)

    async def _roots(
        self, context: ClientRequestContext
    ) -> types.ListRootsResult | types.ErrorData:
        return await self._ask(types.ListRootsRequest(), types.ListRootsResult)

    async def _ask(self, request: Any, result_type: type[ResultT]) -> ResultT | types.ErrorData:
        ctx = self._in_flight[-1] if self._in_flight else None
        session = ctx.session if ctx is not None else self.standalone
        if session is None:
            return _no_client(request.method, "no client is connected")
        metadata = (
            ServerMessageMetadata(related_request_id=ctx.request_id)
            if ctx is not None and ctx.request_id is not None
            else None
        )
        try:
            return await session.send_request(request, result_type, metadata=metadata)
        except MCPError as exc:
            return exc.error
        except Exception as exc:  # no back channel (2026-07-28), a closed stream…
            return _no_client(request.method, str(exc) or type(exc).__name__)

    # ------------------------------------------------------------------ notifications
    async def _notification(self, upstream: str, message: IncomingMessage) -> None:
        if isinstance(message, Exception):
            log.debug("upstream %s transport error: %s", upstream or "upstream", message)
            return
        kind = _CHANGED.get(type(message))
        if kind is not None:
            self.on_changed(upstream, kind)
        event = _event_of(message)
        if event is not None:
            await self._publish(event)
        ctx = self._in_flight[-1] if self._in_flight else None
        try:
            if isinstance(message, types.LoggingMessageNotification) and ctx is not None:
                await ctx.session.send_notification(message, related_request_id=ctx.request_id)
            elif self.standalone is not None:
                await self.standalone.send_notification(message)
        except Exception as exc:  # a lost notification must not break the upstream link
            log.debug("could not forward %s: %s", message.method, exc)

    async def _event(self, upstream: str, event: ServerEvent) -> None:
        """A change event from a 2026-07-28 upstream's listen stream: to both eras."""
        kind = _EVENT_KIND.get(type(event))
        if kind is not None:
            self.on_changed(upstream, kind)
        await self._publish(event)
        if self.standalone is not None:  # a 2025-11-25 client: as a plain notification
            try:
                await self.standalone.send_notification(event_to_notification(event, {}))
            except Exception as exc:
                log.debug("could not forward %s: %s", type(event).__name__, exc)

    async def _publish(self, event: ServerEvent) -> None:
        if self.bus is not None:
            try:
                await self.bus.publish(event)
            except Exception as exc:  # a lost event must not break the upstream link
                log.debug("could not publish %s: %s", type(event).__name__, exc)


def _event_of(message: Any) -> ServerEvent | None:
    """The listen-stream event a 2025-11-25 upstream notification stands for."""
    if isinstance(message, types.ToolListChangedNotification):
        return ToolsListChanged()
    if isinstance(message, types.PromptListChangedNotification):
        return PromptsListChanged()
    if isinstance(message, types.ResourceListChangedNotification):
        return ResourcesListChanged()
    if isinstance(message, types.ResourceUpdatedNotification):
        return ResourceUpdated(uri=str(message.params.uri))
    return None


def _no_client(method: str, why: str) -> types.ErrorData:
    return types.ErrorData(
        code=types.INVALID_REQUEST,
        message=f"{method} cannot reach the client behind signoff's proxy: {why}",
    )


async def client_left(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the HTTP request ``ctx`` arrived on was dropped by its client.

    On 2025-11-25 streamable HTTP a dropped POST is not a cancellation (the client may
    resume), so the SDK keeps the handler running; a held call whose client is gone must
    still be withdrawn, or a later approval would run the tool for nobody.
    """
    request = ctx.request
    is_disconnected = getattr(request, "is_disconnected", None)
    if is_disconnected is None:
        return False
    try:
        return bool(await is_disconnected())
    except Exception:
        return False
