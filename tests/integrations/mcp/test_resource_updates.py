"""Resource updates reach 2026-07-28 clients: while a client listens for a resource, the
proxy holds a subscription upstream (``resources/subscribe`` on a 2025-11-25 upstream, a
listen stream of its own on a 2026-07-28 one) and relays the upstream's updates to the
client's ``subscriptions/listen`` stream; the last listener leaving unsubscribes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.subscriptions import ResourceUpdated
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from signoff import Gate
from tests.integrations.mcp.conftest import POLICY, proxied, until
from tests.integrations.mcp.test_http import ProxyProcess

URI = "notes://readme"


@pytest.mark.parametrize("upstream_mode", ["legacy", "auto"], ids=["up-2025", "up-2026"])
async def test_a_2026_client_listening_for_a_resource_gets_its_updates(
    gate: Gate, upstream: Any, upstream_mode: str
) -> None:
    server, events = upstream
    async with proxied(gate, server, mode="auto", upstream_mode=upstream_mode) as client:
        assert client.protocol_version in MODERN_PROTOCOL_VERSIONS
        async with client.listen(resource_subscriptions=[URI]) as stream:
            if upstream_mode == "legacy":
                assert f"subscribe {URI}" in events  # before the stream was acknowledged
            await client.call_tool("touch", {"uri": URI})
            with anyio.fail_after(10):
                event = await stream.__anext__()
        assert event == ResourceUpdated(uri=URI)
        if upstream_mode == "legacy":

            async def unsubscribed() -> bool:
                return f"unsubscribe {URI}" in events

            await until(unsubscribed)


async def test_two_listeners_share_one_upstream_subscription(gate: Gate, upstream: Any) -> None:
    server, events = upstream
    async with proxied(gate, server, mode="auto", upstream_mode="legacy") as client:
        async with client.listen(resource_subscriptions=[URI]):
            async with client.listen(resource_subscriptions=[URI]):
                pass
            assert events.count(f"subscribe {URI}") == 1
            assert f"unsubscribe {URI}" not in events  # the first listener is still there

        async def unsubscribed() -> bool:
            return f"unsubscribe {URI}" in events

        await until(unsubscribed)
    assert events.count(f"unsubscribe {URI}") == 1


async def test_a_2026_client_over_http_gets_resource_updates(tmp_path: Path) -> None:
    """A real `signoff mcp-proxy --transport http` process and its stdio upstream (2026-07-28
    on both hops): the listen stream carries the resource's update."""
    config = tmp_path / "signoff.yaml"
    config.write_text("store: sqlite:///signoff.db\n" + POLICY, encoding="utf-8")
    proxy = ProxyProcess(config)
    try:
        async with (
            Client(proxy.url, mode="auto") as client,
            client.listen(resource_subscriptions=[URI]) as stream,
        ):
            await client.call_tool("touch", {"uri": URI})
            with anyio.fail_after(30):
                event = await stream.__anext__()
    finally:
        proxy.stop()
    assert event == ResourceUpdated(uri=URI)
