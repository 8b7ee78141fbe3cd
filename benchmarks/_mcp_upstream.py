"""The upstream MCP server of the ``mcp`` benchmark: one ``echo`` tool.

Run with ``python -m benchmarks._mcp_upstream`` it serves stdio (the stdio arm), with
``--http PORT`` streamable HTTP on loopback (the HTTP arm); :func:`make_server` serves in
process.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer


def make_server(**settings: Any) -> MCPServer:
    server = MCPServer("bench-upstream", **settings)

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    return server


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        make_server(log_level="WARNING").run("streamable-http", port=int(sys.argv[2]))
    else:
        make_server().run()
