"""MCP integration (``signoff[mcp]``): an approval proxy for any MCP server, and a human
inquiry server. Both are low-level ``mcp`` 2.x servers over one :class:`~signoff.Gate`, so
they serve stdio, streamable HTTP or in-memory clients, in both protocol eras."""

from signoff.integrations.mcp.inquiry import (
    InquiryOptions,
    InquiryService,
    Suggester,
    build_inquiry_server,
)
from signoff.integrations.mcp.proxy import ApprovalProxy, ProxyOptions
from signoff.integrations.mcp.proxy_server import build_proxy
from signoff.integrations.mcp.serving import serve
from signoff.integrations.mcp.upstreams import (
    UpstreamError,
    UpstreamSpec,
    command_upstream,
    parse_upstream,
)

__all__ = [
    "ApprovalProxy",
    "InquiryOptions",
    "InquiryService",
    "ProxyOptions",
    "Suggester",
    "UpstreamError",
    "UpstreamSpec",
    "build_inquiry_server",
    "build_proxy",
    "command_upstream",
    "parse_upstream",
    "serve",
]
