"""Resource subscriptions the proxy holds upstream, renewed when an upstream restarts.

A restarted upstream is a new MCP session that knows none of the old one's subscriptions.
Before the link is used again (:attr:`UpstreamLink.on_restart` runs before the new client is
published) the pool sends ``resources/subscribe`` again for every URI a 2025-11-25 client
subscribed to through the proxy (:class:`Resubscriptions`), and its restart hooks do the
same for the proxy's own subscriptions (:class:`~.listening.SubscribingListen`). A URI the
new upstream refuses, or does not answer for within :data:`RENEW_TIMEOUT`, is logged once at
WARNING (without its query string) and dropped; the others are renewed all the same.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types

from signoff.integrations.mcp.link import UpstreamLink, describe
from signoff.integrations.mcp.upstreams import without_query

log = logging.getLogger("signoff.mcp")

#: How long a restarted upstream may take to accept one renewed subscription.
RENEW_TIMEOUT = 10.0

#: Called with a restarted link and its new client before the link is used again.
RestartHook = Callable[[UpstreamLink, Any], Awaitable[None]]


async def subscribe(client: Any, uri: str) -> None:
    """``resources/subscribe`` for ``uri`` on a (2025-11-25) upstream client."""
    request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
    await client.session.send_request(request, types.EmptyResult)


def refused(link: UpstreamLink, uri: str, exc: BaseException) -> None:
    """Log, once per lost subscription, that the restarted upstream would not renew it."""
    shown = without_query(uri)
    why = describe(exc).replace(uri, shown) if uri != shown else describe(exc)
    if isinstance(exc, TimeoutError):
        why = f"no answer within {RENEW_TIMEOUT:g} s"
    log.warning(
        "upstream %s restarted but refused the subscription to %s (%s); no more updates of "
        "it reach the clients that asked",
        link.spec.label,
        shown,
        why,
    )


class Resubscriptions:
    """The upstream subscriptions 2025-11-25 clients made through one pool, per upstream."""

    def __init__(self) -> None:
        #: upstream name -> {URI the upstream knows: URI the client used}
        self._held: dict[str, dict[str, str]] = {}

    def add(self, link: UpstreamLink, uri: str, shown: str) -> None:
        self._held.setdefault(link.name, {})[uri] = shown

    def discard(self, link: UpstreamLink, uri: str) -> None:
        self._held.get(link.name, {}).pop(uri, None)

    def uris(self, link: UpstreamLink) -> list[str]:
        return list(self._held.get(link.name, {}))

    async def renew(self, link: UpstreamLink, client: Any) -> None:
        """Subscribe the restarted ``link`` (its new ``client``) to every URI again."""
        held = self._held.get(link.name, {})
        for uri, shown in list(held.items()):
            try:
                with anyio.fail_after(RENEW_TIMEOUT):
                    await subscribe(client, uri)
            except Exception as exc:
                held.pop(uri, None)
                refused(link, shown, exc)
