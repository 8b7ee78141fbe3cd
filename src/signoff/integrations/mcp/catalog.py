"""What the upstreams offer, merged as the client sees it, cached, and routed back.

* **Names.** One upstream keeps its names. With several, tools and prompts are shown as
  ``NAME__tool``; resources keep their URIs (they are globally meaningful), and only a URI
  offered by two upstreams is rewritten to ``NAME+uri`` for each of them.
* **Cache.** Each upstream's listings are kept until it says they changed
  (``notifications/*/list_changed``), a TTL passes (for upstreams that never say), the
  upstream restarts, or a name cannot be routed (refreshed once). A ``tools/call`` therefore
  makes exactly one upstream request.
* **Fields.** Listed items pass through whole (annotations, output schemas, execution/task
  support, icons, ``_meta``); only the name (or a duplicated URI) changes.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError

from signoff.integrations.mcp.link import UpstreamLink
from signoff.integrations.mcp.upstreams import SEPARATOR

log = logging.getLogger("signoff.mcp")

Kind = Literal["tools", "prompts", "resources", "templates"]
KINDS: tuple[Kind, ...] = ("tools", "prompts", "resources", "templates")
#: Listings older than this are fetched again (for upstreams that never send list_changed).
DEFAULT_TTL = 60.0
#: The prefix that tells apart a URI two upstreams both offer: ``NAME+uri``.
URI_MARK = "+"
_MAX_PAGES = 1000  # a paginator that never ends cannot hang the proxy


class UpstreamDown(MCPError):
    """An upstream the request needs is not connected (restarting or given up)."""

    def __init__(self, label: str, reason: str) -> None:
        text = f"the MCP server {label} behind signoff's proxy is not available ({reason})"
        super().__init__(code=types.INTERNAL_ERROR, message=text)


@dataclass(frozen=True, slots=True)
class Route:
    """Where a client-visible tool name goes: which upstream, under which name there."""

    upstream: str
    tool: str
    listed: types.Tool


@dataclass(slots=True)
class _Listing:
    items: list[Any]
    fetched: float


class Catalog:
    """The merged, cached listings of a set of upstream links."""

    def __init__(self, links: Sequence[UpstreamLink], *, ttl: float = DEFAULT_TTL) -> None:
        self.links = {link.name: link for link in links}
        self.prefixed = len(links) > 1
        self.ttl = ttl
        self._cache: dict[tuple[Kind, str], _Listing] = {}
        self._tools: dict[str, Route] = {}
        self._prompts: dict[str, tuple[str, str]] = {}
        self._uris: dict[str, tuple[str, str]] = {}
        self._templates: list[tuple[str, str]] = []  # (literal prefix, upstream)
        self._lock = anyio.Lock()

    # ------------------------------------------------------------------ cache
    def invalidate(self, upstream: str, kind: Kind | None = None) -> None:
        for k in KINDS if kind is None else (kind,):
            self._cache.pop((k, upstream), None)

    async def _items(self, kind: Kind, link: UpstreamLink, fetch: Fetch) -> list[Any]:
        key = (kind, link.name)
        client = link.client
        if client is None:  # never a stale listing of a server that cannot be called
            raise UpstreamDown(link.spec.label, link.state.reason or "not connected")
        found = self._cache.get(key)
        if found is not None and anyio.current_time() - found.fetched < self.ttl:
            return found.items
        items: list[Any] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page_items, cursor = await fetch(client.session, cursor)
            items.extend(page_items)
            if cursor is None:
                break
        self._cache[key] = _Listing(items, anyio.current_time())
        return items

    async def _merged(self, kind: Kind, fetch: Fetch) -> list[tuple[str, Any]]:
        """Every upstream's items of ``kind`` tagged with the upstream; an error when every
        upstream offering them is down (never an empty list that hides the failure)."""
        out: list[tuple[str, Any]] = []
        down: list[UpstreamDown] = []
        for link in self.links.values():
            if not _offers(link, kind):
                continue
            try:
                items = await self._items(kind, link, fetch)
            except UpstreamDown as exc:
                down.append(exc)
                continue
            except MCPError:
                raise
            except Exception as exc:  # a broken listing: the link decides if it is gone
                log.warning("listing %s of %s failed: %s", kind, link.spec.label, exc)
                raise UpstreamDown(link.spec.label, f"listing {kind} failed: {exc}") from None
            out.extend((link.name, item) for item in items)
        if down and (not out or len(down) == len(self.links)):
            raise down[0]
        for missing in down:
            log.warning("%s; its %s are not listed", missing.error.message, kind)
        return out

    # ------------------------------------------------------------------ tools
    def visible(self, upstream: str, name: str) -> str:
        return f"{upstream}{SEPARATOR}{name}" if self.prefixed else name

    async def tools(self) -> list[types.Tool]:
        async with self._lock:
            merged = await self._merged("tools", _fetch_tools)
            routes: dict[str, Route] = {}
            tools: list[types.Tool] = []
            for upstream, tool in merged:
                shown = tool.model_copy(update={"name": self.visible(upstream, tool.name)})
                tools.append(shown)
                routes[shown.name] = Route(upstream, tool.name, shown)
            self._tools = routes
            return tools

    async def route(self, name: str) -> Route | None:
        """Where tool ``name`` goes; lists again once when it is not known yet."""
        route = self._tools.get(name)
        if route is None:
            for link in self.links.values():
                self.invalidate(link.name, "tools")
            await self.tools()
            route = self._tools.get(name)
        return route

    def cached_route(self, name: str) -> Route | None:
        return self._tools.get(name)

    @property
    def tool_names(self) -> list[str]:
        return sorted(self._tools)

    # ------------------------------------------------------------------ prompts
    async def prompts(self) -> list[types.Prompt]:
        merged = await self._merged("prompts", _fetch_prompts)
        self._prompts = {}
        shown: list[types.Prompt] = []
        for upstream, prompt in merged:
            name = self.visible(upstream, prompt.name)
            self._prompts[name] = (upstream, prompt.name)
            shown.append(prompt.model_copy(update={"name": name}))
        return shown

    async def prompt_route(self, name: str) -> tuple[UpstreamLink, str]:
        if name not in self._prompts:
            await self.prompts()
        found = self._prompts.get(name)
        if found is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {name}")
        return self._up(found[0]), found[1]

    # ------------------------------------------------------------------ resources
    async def resources(self) -> list[types.Resource]:
        merged = await self._merged("resources", _fetch_resources)
        owners: dict[str, int] = {}
        for _, res in merged:
            owners[str(res.uri)] = owners.get(str(res.uri), 0) + 1
        self._uris = {}
        shown: list[types.Resource] = []
        for upstream, res in merged:
            uri = str(res.uri)
            visible = f"{upstream}{URI_MARK}{uri}" if owners[uri] > 1 else uri
            self._uris[visible] = (upstream, uri)
            shown.append(res if visible == uri else res.model_copy(update={"uri": visible}))
        return shown

    async def templates(self) -> list[types.ResourceTemplate]:
        merged = await self._merged("templates", _fetch_templates)
        self._templates = sorted(
            ((t.uri_template.split("{", 1)[0], upstream) for upstream, t in merged),
            key=lambda pair: -len(pair[0]),
        )
        return [t for _, t in merged]

    async def resource_route(self, uri: str) -> tuple[UpstreamLink, str]:
        """The upstream that serves ``uri`` and the URI it knows it by."""
        if len(self.links) == 1:
            return next(iter(self.links.values())), uri
        if uri not in self._uris:
            await self.resources()
        if uri in self._uris:
            upstream, original = self._uris[uri]
            return self._up(upstream), original
        name, mark, rest = uri.partition(URI_MARK)
        if mark and name in self.links:
            return self._up(name), rest
        if not self._templates:
            await self.templates()
        for prefix, upstream in self._templates:
            if prefix and uri.startswith(prefix):
                return self._up(upstream), uri
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown resource: {uri}")

    def _up(self, upstream: str) -> UpstreamLink:
        link = self.links[upstream]
        if link.client is None:
            raise UpstreamDown(link.spec.label, link.state.reason or "not connected")
        return link


Fetch = Callable[[Any, str | None], Awaitable[tuple[list[Any], str | None]]]


async def _fetch_tools(session: Any, cursor: str | None) -> tuple[list[Any], str | None]:
    page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
    return list(page.tools), page.next_cursor


async def _fetch_prompts(session: Any, cursor: str | None) -> tuple[list[Any], str | None]:
    page = await session.list_prompts(params=types.PaginatedRequestParams(cursor=cursor))
    return list(page.prompts), page.next_cursor


async def _fetch_resources(session: Any, cursor: str | None) -> tuple[list[Any], str | None]:
    page = await session.list_resources(params=types.PaginatedRequestParams(cursor=cursor))
    return list(page.resources), page.next_cursor


async def _fetch_templates(session: Any, cursor: str | None) -> tuple[list[Any], str | None]:
    page = await session.list_resource_templates(params=types.PaginatedRequestParams(cursor=cursor))
    return list(page.resource_templates), page.next_cursor


def _offers(link: UpstreamLink, kind: Kind) -> bool:
    if link.client is None:
        return True  # down: listing it raises, so the failure is seen
    caps = link.capabilities
    if kind == "tools":
        return caps.tools is not None
    if kind == "prompts":
        return caps.prompts is not None
    return caps.resources is not None


def mirror(links: Sequence[UpstreamLink], *, modern: bool) -> types.ServerCapabilities:
    """The capabilities to declare to the client: the union of the upstreams' (tools always;
    the proxy gates them). ``listChanged`` where an upstream sends it (at 2026-07-28 the
    changes travel on the proxy's ``subscriptions/listen`` streams); ``subscribe`` not at
    2026-07-28, where per-URI resource subscriptions are not relayed."""
    caps = [link.capabilities for link in links]
    prompts = [c.prompts for c in caps if c.prompts is not None]
    resources = [c.resources for c in caps if c.resources is not None]
    tools_changed = any(c.tools is not None and bool(c.tools.list_changed) for c in caps)
    return types.ServerCapabilities(
        tools=types.ToolsCapability(list_changed=tools_changed),
        prompts=types.PromptsCapability(list_changed=any(bool(p.list_changed) for p in prompts))
        if prompts
        else None,
        resources=types.ResourcesCapability(
            subscribe=not modern and any(bool(r.subscribe) for r in resources),
            list_changed=any(bool(r.list_changed) for r in resources),
        )
        if resources
        else None,
        completions=types.CompletionsCapability() if any(c.completions for c in caps) else None,
        logging=types.LoggingCapability() if any(c.logging for c in caps) and not modern else None,
    )
