"""A streamable-HTTP upstream that polls (SEP-1699): with an event store, it closes a call's
SSE stream after the priming event and answers later, so the client must resume the stream
with ``Last-Event-ID`` to get the answer. Run as ``python polling_upstream.py PORT``."""

from __future__ import annotations

import itertools
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp_types import JSONRPCMessage

RETRY_MS = 50  # the reconnection delay the server asks for (the SDK's default is 1 s)


class MemoryEvents(EventStore):
    """Every event of every stream, in order; ``forgetting`` makes it answer no replay (a
    server restarted without its store)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, JSONRPCMessage | None]] = []
        self.ids = itertools.count(1)
        self.replays = 0
        self.forgetting = False

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        event_id = str(next(self.ids))
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        self.replays += 1
        if self.forgetting:
            return None
        at = next((i for i, e in enumerate(self.events) if e[0] == last_event_id), None)
        if at is None:
            return None
        stream = self.events[at][1]
        for event_id, stream_id, message in self.events[at + 1 :]:
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


def make_server(events: MemoryEvents) -> MCPServer:
    server = MCPServer("polling")
    ran: list[str] = []

    @server.tool()
    async def closes_stream(text: str, ctx: Context) -> str:
        """Closes its own stream before answering: the answer waits in the event store."""
        ran.append(text)
        await ctx.close_sse_stream()
        return f"answered after the gap: {text}"

    @server.tool()
    async def loses_stream(text: str, ctx: Context) -> str:
        """Closes its stream and forgets every event: the stream cannot be resumed."""
        ran.append(text)
        events.forgetting = True
        await ctx.close_sse_stream()
        return f"never delivered: {text}"

    @server.tool()
    def ran_calls() -> list[str]:
        """What the tools above were called with, in order (each call once)."""
        return ran

    @server.tool()
    def replays() -> int:
        """How many times a client asked to resume a stream (GET with Last-Event-ID)."""
        return events.replays

    return server


if __name__ == "__main__":
    store = MemoryEvents()
    make_server(store).run(
        "streamable-http", port=int(sys.argv[1]), event_store=store, retry_interval=RETRY_MS
    )
