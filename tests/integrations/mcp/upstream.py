"""A small upstream MCP server for the proxy tests: harmless, risky, slow and noisy tools.

Run it as a subprocess (``python tests/integrations/mcp/upstream.py``) for the stdio test, or
use :func:`make_upstream` in process. ``EVENTS`` records what ran, so tests can assert that a
rejected call never reached the upstream and an approved one reached it exactly once.
"""

from __future__ import annotations

import os
from typing import Any

import anyio
import mcp_types as types
from mcp.server import MCPServer, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

#: Names a file of resource URIs whose ``resources/subscribe`` this server refuses.
REFUSE_ENV = "SIGNOFF_TEST_UPSTREAM_REFUSES"


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

    @server.tool()
    async def steps(count: int, ctx: Context) -> str:
        """Report progress ``count`` times, then finish."""
        for step in range(1, count + 1):
            await ctx.report_progress(step, count, f"step {step}")
        return f"{count} steps"

    @server.tool()
    def seen() -> str:
        """What this upstream process ran so far (for tests of a separate process)."""
        return "\n".join(events)

    add_features(server, events)
    return server, events


class Colour(BaseModel):
    colour: str


def add_features(server: MCPServer, events: list[str]) -> None:
    """Everything but tools that a client may use, and tools that use the client back."""
    subscribed: set[str] = set()

    @server.resource("notes://readme", mime_type="text/plain")
    def readme() -> str:
        """The readme note."""
        return "read me first"

    @server.resource("notes://{name}")
    def note(name: str) -> str:
        """A note by name."""
        return f"note {name}"

    @server.prompt()
    def greet(name: str) -> str:
        """Greet someone."""
        return f"Hello, {name}!"

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> types.Completion:
        names = [n for n in ("alice", "albert", "bob") if n.startswith(argument.value)]
        return types.Completion(values=names)

    @server.tool()
    async def ask_llm(question: str, ctx: Context) -> str:
        """Ask the client's model (sampling)."""
        reply = await ctx.session.create_message(
            [
                types.SamplingMessage(
                    role="user", content=types.TextContent(type="text", text=question)
                )
            ],
            max_tokens=20,
        )
        content = reply.content
        return content.text if isinstance(content, types.TextContent) else "?"

    @server.tool()
    async def ask_user(question: str, ctx: Context) -> str:
        """Ask the client's user (elicitation)."""
        answer = await ctx.elicit(question, Colour)
        return getattr(getattr(answer, "data", None), "colour", answer.action)

    @server.tool()
    async def which_roots(ctx: Context) -> str:
        """The client's roots."""
        found = await ctx.session.list_roots()
        return ",".join(str(r.uri) for r in found.roots)

    @server.tool()
    async def announce(text: str, ctx: Context) -> str:
        """Log a message and say the tool list changed (2025 era: a notification; 2026-07-28:
        an event on the listen streams)."""
        await ctx.session.send_log_message("info", text, logger="upstream")
        await ctx.session.send_notification(types.ToolListChangedNotification())
        await ctx.notify_tools_changed()
        return "announced"

    @server.tool()
    async def touch(uri: str, ctx: Context) -> str:
        """Say that a resource changed (2025 era: a notification to subscribers; 2026-07-28:
        an event on the listen streams that asked for ``uri``)."""
        if uri in subscribed:  # a 2025 upstream tells only the sessions that subscribed
            await ctx.session.send_resource_updated(uri)
        await ctx.notify_resource_updated(uri)
        return "touched"

    @server.tool()
    def big(size: int) -> str:
        """A large result."""
        return "x" * size

    @server.tool()
    def pid() -> int:
        """The server process's id (one upstream process per proxy session)."""
        return os.getpid()

    @server.tool()
    def crash() -> str:
        """End the server process at once (for restart tests; stdio only)."""
        os._exit(3)

    async def set_level(ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams) -> Any:
        events.append(f"level {params.level}")
        return types.EmptyResult()

    async def subscribe(
        ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> Any:
        refused = os.environ.get(REFUSE_ENV)  # a file of URIs this server no longer offers
        if refused and os.path.exists(refused):
            with open(refused, encoding="utf-8") as file:
                if str(params.uri) in file.read().split():
                    raise MCPError(code=types.INVALID_PARAMS, message="no such resource")
        events.append(f"subscribe {params.uri}")
        subscribed.add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> Any:
        events.append(f"unsubscribe {params.uri}")
        subscribed.discard(str(params.uri))
        return types.EmptyResult()

    # MCPServer has no decorators for these 2025-era methods: register them on its server.
    low = server._lowlevel_server
    low.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    low.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    low.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--http":  # streamable HTTP on a loopback port
        make_upstream()[0].run("streamable-http", port=int(sys.argv[2]))
    else:
        make_upstream()[0].run()  # stdio
