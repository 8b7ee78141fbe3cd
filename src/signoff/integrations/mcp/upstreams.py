"""The MCP servers behind the proxy: how they are named and reached (``--upstream``).

One upstream keeps its names; with several, each tool and prompt is shown to the client as
``NAME__tool`` so two servers' ``search`` tools cannot collide, and the policy's ``tools:``
keys (``github__*``) match what the client sees (see :mod:`.catalog`).
"""

from __future__ import annotations

import logging
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mcp import StdioServerParameters

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

    def describe(self) -> str:
        """How it is reached, for error texts: the command, or the URL without its query."""
        target = self.target
        if isinstance(target, StdioServerParameters):
            return "command: " + shlex.join([target.command, *target.args])
        if isinstance(target, str):
            return "url: " + without_query(target)
        return f"in-process server {getattr(target, 'name', type(target).__name__)}"


def without_query(url: str) -> str:
    """``url`` without its query string or fragment (they may carry tokens)."""
    return url.split("?", 1)[0].split("#", 1)[0]


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


def check_names(specs: Sequence[UpstreamSpec]) -> None:
    """Several upstreams need distinct names (they become the ``NAME__`` prefixes)."""
    if not specs:
        raise UpstreamError("the proxy needs at least one upstream")
    names = [s.name for s in specs]
    if len(specs) > 1 and (not all(names) or len(set(names)) != len(names)):
        raise UpstreamError("with several upstreams each needs a distinct NAME (--upstream NAME=…)")
