"""The upstream MCP server of the ``mcp`` benchmark: one ``echo`` tool.

Run with ``python -m benchmarks._mcp_upstream`` it serves stdio (the stdio arm);
:func:`make_server` serves in process.
"""

from __future__ import annotations

from mcp.server import MCPServer


def make_server() -> MCPServer:
    server = MCPServer("bench-upstream")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    return server


if __name__ == "__main__":
    make_server().run()
