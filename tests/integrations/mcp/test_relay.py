"""Transparent by default: what works direct works through the proxy (real client, real
upstream, both protocol versions) — resources, prompts, completion, logging, list_changed,
and the upstream's own requests to the client (sampling, elicitation, roots)."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from signoff import Gate
from signoff.integrations.mcp import UpstreamSpec
from tests.integrations.mcp.conftest import ERAS, proxied, text_of
from tests.integrations.mcp.upstream import make_upstream

# The 2025-era features under test (logging, sampling, roots, subscribe) are deprecated at
# 2026-07-28; relaying them is the point.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


def _dump(items: list[Any]) -> list[dict[str, Any]]:
    return [i.model_dump(by_alias=True, mode="json", exclude_none=True) for i in items]


@ERAS
async def test_tool_listing_keeps_every_field(gate: Gate, upstream: Any, mode: str) -> None:
    server, _ = upstream
    async with Client(server, mode=mode) as direct:
        expected = _dump((await direct.list_tools()).tools)
    async with proxied(gate, server, mode=mode) as client:
        listed = _dump((await client.list_tools()).tools)
    assert listed == expected


@ERAS
async def test_resources_prompts_and_completion_pass_through(
    gate: Gate, upstream: Any, mode: str
) -> None:
    server, _ = upstream
    async with Client(server, mode=mode) as direct:
        want_resources = _dump((await direct.list_resources()).resources)
        want_templates = _dump((await direct.list_resource_templates()).resource_templates)
        want_prompts = _dump((await direct.list_prompts()).prompts)
    async with proxied(gate, server, mode=mode) as client:
        assert _dump((await client.list_resources()).resources) == want_resources
        assert _dump((await client.list_resource_templates()).resource_templates) == (
            want_templates
        )
        assert _dump((await client.list_prompts()).prompts) == want_prompts
        readme = await client.read_resource("notes://readme")
        templated = await client.read_resource("notes://shopping")
        prompt = await client.get_prompt("greet", {"name": "Ada"})
        done = await client.complete(
            types.PromptReference(type="ref/prompt", name="greet"), {"name": "name", "value": "al"}
        )
    assert [c.text for c in readme.contents if isinstance(c, types.TextResourceContents)] == [
        "read me first"
    ]
    assert [c.text for c in templated.contents if isinstance(c, types.TextResourceContents)] == [
        "note shopping"
    ]
    message = prompt.messages[0].content
    assert isinstance(message, types.TextContent) and message.text == "Hello, Ada!"
    assert done.completion.values == ["alice", "albert"]


async def test_capabilities_are_mirrored_from_the_upstream(gate: Gate, upstream: Any) -> None:
    server, _ = upstream
    async with Client(server, mode="legacy") as direct:
        want = direct.server_capabilities
    async with proxied(gate, server, mode="legacy") as client:
        caps = client.server_capabilities
    assert caps.tools is not None
    assert caps.resources is not None and want.resources is not None
    assert caps.prompts is not None and caps.completions is not None
    assert caps.logging is not None  # the upstream serves logging/setLevel


async def test_an_upstream_request_is_answered_by_the_real_client(
    gate: Gate, upstream: Any
) -> None:
    """Sampling, elicitation and roots from a 2025 upstream reach the client behind the proxy,
    and the proxy declares those capabilities to the upstream because the client did."""
    server, _ = upstream
    seen: list[str] = []

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
        seen.append("sampling")
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="forty-two"), model="m"
        )

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        seen.append(f"elicit {params.message}")
        return types.ElicitResult(action="accept", content={"colour": "teal"})

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work")])

    async with proxied(
        gate,
        server,
        mode="legacy",
        upstream_mode="legacy",
        elicit=elicit,
        sampling_callback=sampling,
        list_roots_callback=roots,
    ) as client:
        asked = await client.call_tool("ask_llm", {"question": "meaning?"})
        chose = await client.call_tool("ask_user", {"question": "Colour?"})
        rooted = await client.call_tool("which_roots", {})
    assert text_of(asked) == "forty-two"
    assert text_of(chose) == "teal"
    assert text_of(rooted) == "file:///work"
    assert seen == ["sampling", "elicit Colour?"]


async def test_without_the_capability_the_upstream_is_told_no(gate: Gate, upstream: Any) -> None:
    """A client that declared no sampling: the upstream's request fails as it would direct."""
    server, _ = upstream
    async with Client(server, mode="legacy") as direct:
        with pytest.raises(MCPError, match="Sampling not supported"):
            await direct.call_tool("ask_llm", {"question": "?"})
    async with proxied(gate, server, mode="legacy", upstream_mode="legacy") as client:
        with pytest.raises(MCPError, match="Sampling not supported"):
            await client.call_tool("ask_llm", {"question": "?"})


async def test_logging_list_changed_and_resource_updates_are_relayed(
    gate: Gate, upstream: Any
) -> None:
    server, events = upstream
    received: list[str] = []
    logs: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification | types.ToolListChangedNotification):
            received.append(getattr(message, "method", type(message).__name__))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async with proxied(
        gate,
        server,
        mode="legacy",
        upstream_mode="legacy",
        message_handler=on_message,
        logging_callback=on_log,
    ) as client:
        await client.set_logging_level("debug")
        await client.subscribe_resource("notes://readme")
        await client.call_tool("announce", {"text": "hello from upstream"})
        await client.call_tool("touch", {"uri": "notes://readme"})
        await client.unsubscribe_resource("notes://readme")
        with anyio.fail_after(10):
            while "notifications/resources/updated" not in received:
                await anyio.sleep(0.01)
    assert logs == ["hello from upstream"]
    assert "notifications/tools/list_changed" in received
    assert events[:2] == ["level debug", "subscribe notes://readme"]
    assert "unsubscribe notes://readme" in events


@ERAS
async def test_one_upstream_request_per_tool_call(gate: Gate, mode: str) -> None:
    """The listing is cached: calls after a tools/list do not list again."""
    server, _ = make_upstream()
    methods: list[str] = []

    async def count(ctx: Any, call_next: Any) -> Any:
        if ctx.request_id is not None:
            methods.append(ctx.method)
        return await call_next(ctx)

    server.middleware.append(count)
    async with proxied(gate, server, mode=mode) as client:
        await client.list_tools()
        for n in range(3):
            await client.call_tool("echo", {"text": str(n)})
    assert methods.count("tools/list") == 1
    assert methods.count("tools/call") == 3


@ERAS
async def test_several_upstreams_namespace_prompts_and_rewrite_shared_uris(
    gate: Gate, mode: str
) -> None:
    a, _ = make_upstream("a")
    b, _ = make_upstream("b")
    specs = [UpstreamSpec("a", a), UpstreamSpec("b", b)]
    async with proxied(gate, a, mode=mode, specs=specs) as client:
        prompts = sorted(p.name for p in (await client.list_prompts()).prompts)
        uris = sorted(str(r.uri) for r in (await client.list_resources()).resources)
        got = await client.get_prompt("b__greet", {"name": "Bo"})
        read = await client.read_resource("b+notes://readme")
        with pytest.raises(MCPError, match="Unknown prompt"):
            await client.get_prompt("greet", {"name": "x"})
    assert prompts == ["a__greet", "b__greet"]
    assert uris == ["a+notes://readme", "b+notes://readme"]
    content = got.messages[0].content
    assert isinstance(content, types.TextContent) and content.text == "Hello, Bo!"
    assert [str(c.uri) for c in read.contents] == ["b+notes://readme"]


@pytest.mark.parametrize("upstream_mode", ["legacy", "auto"], ids=["up-2025", "up-2026"])
async def test_a_2026_client_gets_list_changed_on_its_listen_stream(
    gate: Gate, upstream: Any, upstream_mode: str
) -> None:
    """2026-07-28 clients get change events only on ``subscriptions/listen``: the proxy
    serves it, fed by a 2025 upstream's notifications or a 2026 upstream's own listen
    stream; the cached listing is invalidated on the way."""
    server, _ = upstream
    async with proxied(gate, server, mode="auto", upstream_mode=upstream_mode) as client:
        assert client.protocol_version in MODERN_PROTOCOL_VERSIONS
        async with client.listen(tools_list_changed=True) as events:
            await client.call_tool("announce", {"text": "hello"})
            with anyio.fail_after(10):
                event = await events.__anext__()
    assert isinstance(event, ToolsListChanged)


async def test_a_2025_client_gets_a_2026_upstreams_list_changed(gate: Gate, upstream: Any) -> None:
    """A 2026-07-28 upstream says so on its listen stream; a 2025-11-25 client hears it as
    the plain notification."""
    server, _ = upstream
    received = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            received.set()

    async with proxied(
        gate, server, mode="legacy", upstream_mode="auto", message_handler=on_message
    ) as client:
        await client.call_tool("announce", {"text": "hello"})
        with anyio.fail_after(10):
            await received.wait()
