"""The MCP servers behind the proxy: how they are named, reached, listed and called.

One upstream keeps its tool names; with several, each tool is shown to the client as
``NAME__tool`` so two servers' ``search`` tools cannot collide, and the policy's ``tools:``
keys (``github__*``) match what the client sees. The listing is fetched fresh on every
``tools/list`` (no cache: a pass-through must not serve stale tools) and refreshed once when a
call names a tool the proxy has not seen.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.shared.dispatcher import ProgressFnT

log = logging.getLogger("signoff.mcp")

SEPARATOR = "__"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


class UpstreamError(ValueError):
    """An ``--upstream`` value that cannot be used; the message says how to write it."""


@dataclass(frozen=True, slots=True)
class UpstreamSpec:
    """One upstream: ``name`` ("" for a single unnamed one) and how to reach it.

    ``target`` is anything :class:`mcp.Client` accepts: ``StdioServerParameters`` (a
    subprocess), an ``http(s)://`` URL (streamable HTTP), or an in-process server (tests).
    """

    name: str
    target: Any

    @property
    def label(self) -> str:
        return self.name or "upstream"


def command_upstream(argv: Sequence[str], name: str = "") -> UpstreamSpec:
    """A stdio upstream started with ``argv``; it inherits the proxy's environment, so the
    ``env`` a client config sets on the proxy reaches the wrapped server too."""
    if not argv:
        raise UpstreamError("no upstream command given; write `signoff mcp-proxy -- <command…>`")
    params = StdioServerParameters(command=argv[0], args=list(argv[1:]), env=dict(os.environ))
    return UpstreamSpec(name, params)


def parse_upstream(text: str) -> UpstreamSpec:
    """``NAME=command args…`` (stdio) or ``NAME=https://host/mcp`` (streamable HTTP)."""
    name, sep, rest = text.partition("=")
    name, rest = name.strip(), rest.strip()
    if not sep or not rest:
        raise UpstreamError(
            f"--upstream {text!r} needs NAME=command or NAME=https://…, "
            "e.g. --upstream github='npx -y @modelcontextprotocol/server-github'"
        )
    if not _NAME.match(name) or SEPARATOR in name:
        raise UpstreamError(
            f"upstream name {name!r} must be letters, digits, - or _ (and not contain "
            f"{SEPARATOR!r}); it becomes the tool prefix {name}{SEPARATOR}…"
        )
    if rest.startswith(("http://", "https://")):
        return UpstreamSpec(name, rest)
    try:
        argv = shlex.split(rest)
    except ValueError as exc:
        raise UpstreamError(f"--upstream {name}: cannot parse the command ({exc})") from None
    return command_upstream(argv, name)


@dataclass(frozen=True, slots=True)
class Route:
    """Where a client-visible tool name goes: which upstream, under which name there."""

    upstream: str
    tool: str
    listed: types.Tool


class UpstreamPool:
    """Connections to every upstream, the merged tool listing and the routing table."""

    def __init__(self, specs: Sequence[UpstreamSpec], *, client_mode: str = "auto") -> None:
        if not specs:
            raise UpstreamError("the proxy needs at least one upstream")
        names = [s.name for s in specs]
        if len(specs) > 1 and (not all(names) or len(set(names)) != len(names)):
            raise UpstreamError(
                "with several upstreams each needs a distinct NAME (--upstream NAME=…)"
            )
        self.specs = list(specs)
        self.prefixed = len(specs) > 1
        self.client_mode = client_mode
        self._clients: dict[str, Client] = {}
        self._routes: dict[str, Route] = {}

    async def connect(self, stack: AsyncExitStack) -> None:
        """Open every upstream; each is closed (its process ended) when ``stack`` closes."""
        for spec in self.specs:
            # cache=None: the SDK would otherwise serve tools/list from its TTL cache.
            client = Client(spec.target, mode=self.client_mode, cache=None)
            try:
                self._clients[spec.name] = await stack.enter_async_context(client)
            except Exception as exc:
                raise UpstreamError(f"cannot start or reach {spec.label}: {exc}") from exc

    def visible_name(self, upstream: str, tool: str) -> str:
        return f"{upstream}{SEPARATOR}{tool}" if self.prefixed else tool

    async def list_tools(self) -> list[types.Tool]:
        """Every upstream's tools as the client sees them; rebuilds the routing table."""
        tools: list[types.Tool] = []
        routes: dict[str, Route] = {}
        for spec in self.specs:
            try:
                listed = await self._list_one(self._clients[spec.name])
            except Exception as exc:  # one broken upstream must not hide the others
                log.warning("listing tools of %s failed: %s", spec.label, exc)
                continue
            for tool in listed:
                shown = tool.model_copy(update={"name": self.visible_name(spec.name, tool.name)})
                tools.append(shown)
                routes[shown.name] = Route(spec.name, tool.name, shown)
        self._routes = routes
        return tools

    @staticmethod
    async def _list_one(client: Client) -> list[types.Tool]:
        out: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(1000):  # a paginator that never ends cannot hang the proxy
            page = await client.session.list_tools(
                params=types.PaginatedRequestParams(cursor=cursor)
            )
            out.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return out

    def route(self, name: str) -> Route | None:
        return self._routes.get(name)

    @property
    def tool_names(self) -> list[str]:
        return sorted(self._routes)

    async def call(
        self,
        route: Route,
        args: Mapping[str, Any],
        *,
        progress: ProgressFnT | None = None,
        timeout: float | None = None,
    ) -> types.CallToolResult:
        """Call the upstream tool. ``timeout`` starts now — after any human decision."""
        client = self._clients[route.upstream]
        result = await client.session.call_tool(
            route.tool,
            dict(args),
            read_timeout_seconds=timeout,
            progress_callback=progress,
            allow_input_required=True,
        )
        if isinstance(result, types.InputRequiredResult):
            return types.CallToolResult(
                content=[
                    types.TextContent(
                        type="text",
                        text=f"The server behind `{route.listed.name}` asked for more input "
                        "(elicitation), which signoff's proxy does not relay yet. The tool did "
                        "not finish.",
                    )
                ],
                is_error=True,
            )
        return _without_server_stamp(result)


def _without_server_stamp(result: types.CallToolResult) -> types.CallToolResult:
    """The client talks to the proxy: drop the upstream's serverInfo stamp from the result."""
    meta = result.meta
    if not meta or types.SERVER_INFO_META_KEY not in meta:
        return result
    kept = {k: v for k, v in meta.items() if k != types.SERVER_INFO_META_KEY}
    return result.model_copy(update={"meta": kept or None})
