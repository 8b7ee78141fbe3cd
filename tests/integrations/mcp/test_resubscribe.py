"""Resource subscriptions survive an upstream restart: a real upstream process killed and
restarted by the proxy gets back every subscription the proxy holds for its clients (a
2025-11-25 client's ``resources/subscribe``, the proxy's own for 2026-07-28 listen streams)
before it is used again, so ``notifications/resources/updated`` keeps reaching the clients.
A URI the new process refuses is logged once, without its query, and the rest keep working."""

from __future__ import annotations

import logging
import os
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import StdioServerParameters
from mcp.shared.subscriptions import ResourceUpdated

from signoff import Gate
from signoff.integrations.mcp import UpstreamSpec
from tests.integrations.mcp.conftest import ERAS, proxied
from tests.integrations.mcp.test_upstream_failures import relisted
from tests.integrations.mcp.upstream import REFUSE_ENV

# 2025-11-25 clients subscribe with resources/subscribe, which the SDK marks deprecated
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

UPSTREAM = Path(__file__).with_name("upstream.py")
URI = "notes://readme"
GONE = "notes://gone?token=s3cret"

UPSTREAM_ERAS = pytest.mark.parametrize(
    "upstream_mode", ["legacy", "auto"], ids=["up-2025", "up-2026"]
)


def process_upstream(refuses: Path | None = None) -> UpstreamSpec:
    env = dict(os.environ)
    if refuses is not None:
        env[REFUSE_ENV] = str(refuses)
    params = StdioServerParameters(command=sys.executable, args=[str(UPSTREAM)], env=env)
    return UpstreamSpec("", params)


class Updates:
    """The ``notifications/resources/updated`` a 2025-11-25 client receives."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.taken = 0
        self._arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
            self._arrived.set()
            self._arrived = anyio.Event()

    async def next(self) -> str:
        """The next update not yet taken (it may have arrived before this is called)."""
        with anyio.fail_after(10):
            while len(self.uris) == self.taken:
                await self._arrived.wait()
        self.taken += 1
        return self.uris[self.taken - 1]


async def restart(client: Any) -> None:
    """Kill the upstream process; return once the restarted one answers."""
    died = await client.call_tool("crash", {})
    assert died.is_error
    await relisted(client)


async def test_a_2025_clients_subscription_survives_an_upstream_restart(gate: Gate) -> None:
    updates = Updates()
    specs = [process_upstream()]
    async with proxied(
        gate, None, mode="legacy", upstream_mode="legacy", specs=specs, message_handler=updates
    ) as client:
        await client.subscribe_resource(URI)
        await client.call_tool("touch", {"uri": URI})
        assert await updates.next() == URI
        await restart(client)
        await client.call_tool("touch", {"uri": URI})
        assert await updates.next() == URI


@UPSTREAM_ERAS
async def test_a_2026_listen_stream_survives_an_upstream_restart(
    gate: Gate, upstream_mode: str
) -> None:
    specs = [process_upstream()]
    async with (
        proxied(gate, None, mode="auto", upstream_mode=upstream_mode, specs=specs) as client,
        client.listen(resource_subscriptions=[URI]) as stream,
    ):
        await restart(client)
        await client.call_tool("touch", {"uri": URI})
        with anyio.fail_after(10):
            event = await stream.__anext__()
    assert event == ResourceUpdated(uri=URI)


@ERAS
async def test_a_uri_the_restarted_upstream_refuses_is_logged_once_and_the_rest_kept(
    gate: Gate, mode: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="signoff.mcp")
    refuses = tmp_path / "refused"
    updates = Updates()
    specs = [process_upstream(refuses)]
    async with proxied(
        gate, None, mode=mode, upstream_mode="legacy", specs=specs, message_handler=updates
    ) as client:
        if mode == "legacy":
            await client.subscribe_resource(URI)
            await client.subscribe_resource(GONE)
            refuses.write_text(GONE + "\n", encoding="utf-8")
            for _ in range(2):  # a second restart does not log it again
                await restart(client)
                await client.call_tool("touch", {"uri": URI})
                assert await updates.next() == URI
        else:
            async with client.listen(resource_subscriptions=[URI, GONE]) as stream:
                refuses.write_text(GONE + "\n", encoding="utf-8")
                for _ in range(2):
                    await restart(client)
                    await client.call_tool("touch", {"uri": URI})
                    with anyio.fail_after(10):
                        assert await stream.__anext__() == ResourceUpdated(uri=URI)
    gone = [r for r in caplog.records if "notes://gone" in r.getMessage()]
    assert [r.levelno for r in gone] == [logging.WARNING], [r.getMessage() for r in gone]
    assert "refused the subscription to notes://gone (" in gone[0].getMessage()
    assert "s3cret" not in caplog.text and "token" not in caplog.text


async def test_a_listener_whose_subscription_failed_does_not_end_a_later_ones(
    gate: Gate, tmp_path: Path
) -> None:
    """Streams whose upstream subscription failed are counted too: when one ends, a later
    stream for the same URI (subscribed then) keeps its upstream subscription."""
    later = "notes://later"
    refuses = tmp_path / "refused"
    refuses.write_text(later + "\n", encoding="utf-8")
    specs = [process_upstream(refuses)]
    async with proxied(gate, None, mode="auto", upstream_mode="legacy", specs=specs) as client:
        first = AsyncExitStack()
        await first.enter_async_context(client.listen(resource_subscriptions=[later]))
        refuses.unlink()  # the upstream offers it now
        async with client.listen(resource_subscriptions=[later]) as second:
            await first.aclose()  # the refused stream ends while the second listens
            await client.call_tool("touch", {"uri": later})
            with anyio.fail_after(10):
                event = await second.__anext__()
    assert event == ResourceUpdated(uri=later)
