"""Resource updates for 2026-07-28 clients: subscribed upstream while a client listens.

A 2026-07-28 client asks for a resource's updates in its ``subscriptions/listen`` filter
(``resourceSubscriptions``); the proxy's :class:`~mcp.server.subscriptions.ListenHandler`
serves the stream from the bus the shared session publishes to. This wrapper makes the
upstream send those updates in the first place: before the stream is acknowledged it
subscribes upstream to each URI (a 2025-11-25 upstream: ``resources/subscribe``; a
2026-07-28 one: a listen stream of the proxy's own with that URI), counted per URI, and
when the last stream listening for a URI ends it unsubscribes. An upstream that cannot
subscribe (down, no such resource, no ``subscribe`` capability) is logged; the stream is
still served, as the SDK honours a URI that never changes (a later listener for that URI
tries again). When an upstream restarts, its subscriptions are made again on the new session
before it is used (:meth:`SubscribingListen.renew`, see :mod:`.resubscribe`).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.subscriptions import ListenHandler
from mcp.shared.subscriptions import ServerEvent
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from signoff.integrations.mcp.link import UpstreamLink, describe
from signoff.integrations.mcp.resubscribe import RENEW_TIMEOUT, refused, subscribe
from signoff.integrations.mcp.sessions import ProxySession, SessionHub
from signoff.integrations.mcp.upstreams import without_query

log = logging.getLogger("signoff.mcp")


class _Held:
    """One URI's upstream subscription: how many listen streams want it, how to end it."""

    def __init__(self, link: UpstreamLink | None, uri: str) -> None:
        self.link = link
        self.uri = uri
        self.listeners = 0
        self.stop: anyio.CancelScope | None = None  # a 2026-07-28 upstream's listen task
        #: False: not subscribed upstream (it failed); the listeners are still counted.
        self.live = False


class SubscribingListen:
    """``subscriptions/listen`` that also subscribes upstream to the resources listened for."""

    def __init__(self, inner: ListenHandler) -> None:
        self.inner = inner
        self.held: dict[str, _Held] = {}
        self.hub: SessionHub | None = None
        self._lock = anyio.Lock()

    async def __call__(
        self,
        ctx: ServerRequestContext[SessionHub, Any],
        params: types.SubscriptionsListenRequestParams,
    ) -> types.SubscriptionsListenResult:
        uris = list(params.notifications.resource_subscriptions or ())
        if not uris:
            return await self.inner(ctx, params)
        self.hub = ctx.lifespan_context
        session = await ctx.lifespan_context.session_for(ctx)
        hooks = session.pool.restart_hooks
        if self.renew not in hooks:
            hooks.append(self.renew)
        acquired: list[str] = []
        try:
            for uri in uris:
                await self._acquire(ctx.lifespan_context, session, uri)
                acquired.append(uri)
            return await self.inner(ctx, params)
        finally:
            with anyio.CancelScope(shield=True):
                for uri in acquired:
                    await self._release(uri)

    async def _acquire(self, hub: SessionHub, session: ProxySession, uri: str) -> None:
        async with self._lock:
            held = self.held.get(uri)
            if held is None or not held.live:
                fresh = _Held(None, uri)
                try:
                    fresh.link, fresh.uri = await session.pool.catalog.resource_route(uri)
                    await _subscribe(hub, fresh, fresh.link.client)
                    fresh.live = True
                except Exception as exc:
                    shown = without_query(uri)
                    why = describe(exc).replace(uri, shown)
                    log.warning("cannot subscribe upstream to %s: %s", shown, why)
                if held is not None:
                    fresh.listeners = held.listeners
                held = self.held[uri] = fresh
            held.listeners += 1

    async def _release(self, uri: str) -> None:
        async with self._lock:
            held = self.held.get(uri)
            if held is None:
                return
            held.listeners -= 1
            if held.listeners > 0:
                return
            del self.held[uri]
            if not held.live or held.link is None:
                return
            if held.stop is not None:
                held.stop.cancel()
                return
            client = held.link.client
            if client is None:
                return
            request = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=held.uri))
            try:
                await client.session.send_request(request, types.EmptyResult)
            except Exception as exc:
                shown = without_query(held.uri)
                log.debug("unsubscribing upstream from %s failed: %s", shown, describe(exc))

    async def renew(self, link: UpstreamLink, client: Any) -> None:
        """Subscribe a restarted upstream (its new ``client``) again to every URI listened
        for; one it refuses is logged once and no longer held (:mod:`.resubscribe`)."""
        hub = self.hub
        if hub is None:
            return
        async with self._lock:
            for uri, held in self.held.items():
                if held.link is not link or not held.live:
                    continue
                if held.stop is not None:  # the old session's listen task (it has ended)
                    held.stop.cancel()
                    held.stop = None
                try:
                    with anyio.fail_after(RENEW_TIMEOUT):
                        await _subscribe(hub, held, client)
                except Exception as exc:
                    held.live = False
                    refused(link, uri, exc)


async def _subscribe(hub: SessionHub, held: _Held, client: Any) -> None:
    """Subscribe ``client`` (the upstream of ``held.link``) to ``held.uri``."""
    link = held.link
    if link is None or client is None:
        raise RuntimeError(f"upstream {link.spec.label if link else ''} is not connected")
    if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        await subscribe(client, held.uri)
        return
    deliver = link.hooks.events
    if deliver is None:
        raise RuntimeError("no one to deliver the upstream's events to")
    held.stop = await hub.tg.start(_listen_upstream, client, held.uri, deliver)


async def _listen_upstream(
    client: Any,
    uri: str,
    deliver: Any,
    *,
    task_status: anyio.abc.TaskStatus[anyio.CancelScope],
) -> None:
    """A 2026-07-28 upstream's listen stream for one resource, until cancelled. Once
    started it never raises: it runs in the hub's task group, which an error would end."""
    started = False
    with anyio.CancelScope() as scope:
        try:
            async with client.listen(resource_subscriptions=[uri]) as events:
                task_status.started(scope)
                started = True
                event: ServerEvent
                async for event in events:
                    await deliver(event)
        except Exception as exc:  # the upstream went away: its link restarts itself
            if not started:
                raise
            shown = without_query(uri)
            log.info("updates of %s from the upstream ended: %s", shown, describe(exc))
