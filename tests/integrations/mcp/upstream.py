"""A small upstream MCP server for the proxy tests: harmless, risky, slow and noisy tools.

Run it as a subprocess (``python tests/integrations/mcp/upstream.py``) for the stdio test, or
use :func:`make_upstream` in process. ``EVENTS`` records what ran, so tests can assert that a
rejected call never reached the upstream and an approved one reached it exactly once.
"""

from __future__ import annotations

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context


def make_upstream(name: str = "upstream") -> tuple[MCPServer, list[str]]:
    server = MCPServer(name)
    events: list[str] = []

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        events.append(f"echo {text}")
        return text

    @server.tool()
    async def delete_file(path: str, ctx: Context) -> str:
        """Delete a file (pretend; the risky one)."""
        events.append(f"delete_file {path}")
        await ctx.report_progress(0.5, 1.0, "deleting")
        return f"deleted {path}"

    @server.tool()
    def transfer(amount: int, to: str) -> str:
        """Move money (pretend)."""
        events.append(f"transfer {amount} {to}")
        return f"sent {amount} to {to}"

    @server.tool()
    def write_note(text: str) -> str:
        """Write a note (the developer may approve this one themselves)."""
        events.append(f"write_note {text}")
        return f"noted {text}"

    @server.tool()
    def purge_cache() -> str:
        """A tool the policy does not list."""
        events.append("purge_cache")
        return "purged"

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep (for cancellation tests)."""
        events.append("slow started")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            events.append("slow cancelled")
            raise
        return "done"

    return server, events


if __name__ == "__main__":
    make_upstream()[0].run()  # stdio
