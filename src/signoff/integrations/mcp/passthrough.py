"""Everything but ``tools/call``: relayed to the upstream that owns it, unchanged.

Resources (list, read, templates, subscribe/unsubscribe), prompts (list, get), completion,
``logging/setLevel`` and the client's ``roots/list_changed``. Each handler finds the
request's proxy session, routes by name or URI through the session's catalog, and asks the
upstream once; while it runs, the upstream's own requests to the client ride this request's
stream. An upstream that is down answers with an MCP error naming it. (Logging and
subscriptions are deprecated at 2026-07-28; they are relayed as plain requests for the
clients and servers that still use them.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from signoff.integrations.mcp.catalog import UpstreamDown
from signoff.integrations.mcp.gating import PROMPT_TOOL, READ_TOOL
from signoff.integrations.mcp.link import UpstreamLink
from signoff.integrations.mcp.safeguards import audit_refusal
from signoff.integrations.mcp.sessions import ProxySession, SessionHub
from signoff.model import ToolCall, new_id

Ctx = ServerRequestContext[SessionHub, Any]


async def _session(ctx: Ctx) -> ProxySession:
    return await ctx.lifespan_context.session_for(ctx)


def _client(link: UpstreamLink) -> Any:
    client = link.client
    if client is None:
        raise UpstreamDown(link.spec.label, link.state.reason or "not connected")
    return client


async def list_prompts(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
    session = await _session(ctx)
    return types.ListPromptsResult(prompts=await session.pool.catalog.prompts())


async def get_prompt(ctx: Ctx, params: types.GetPromptRequestParams) -> Any:
    session = await _session(ctx)

    async def run(args: dict[str, Any]) -> Any:
        link, name = await session.pool.catalog.prompt_route(str(args["name"]))
        with session.pool.downstream.serving(ctx):
            return await _client(link).session.get_prompt(name, args.get("arguments"))

    args = {"name": params.name, "arguments": dict(params.arguments or {})}
    decision, key = session.proxy.gating.prompt(params.name)
    return await _gated(ctx, session, decision, key, PROMPT_TOOL, args, run)


async def list_resources(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
    session = await _session(ctx)
    return types.ListResourcesResult(resources=await session.pool.catalog.resources())


async def list_templates(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
    session = await _session(ctx)
    templates = await session.pool.catalog.templates()
    return types.ListResourceTemplatesResult(resource_templates=templates)


async def read_resource(ctx: Ctx, params: types.ReadResourceRequestParams) -> Any:
    session = await _session(ctx)

    async def run(args: dict[str, Any]) -> Any:
        shown = str(args["uri"])
        link, uri = await session.pool.catalog.resource_route(shown)
        with session.pool.downstream.serving(ctx):
            result = await _client(link).session.read_resource(uri)
        if uri != shown:  # a rewritten duplicate: show the client its own URI back
            contents = [c.model_copy(update={"uri": shown}) for c in result.contents]
            result = result.model_copy(update={"contents": contents})
        return result

    decision, key = session.proxy.gating.resource(str(params.uri))
    return await _gated(ctx, session, decision, key, READ_TOOL, {"uri": str(params.uri)}, run)


async def _gated(
    ctx: Ctx,
    session: ProxySession,
    decision: str,
    key: str | None,
    tool: str,
    args: dict[str, Any],
    run: Callable[[dict[str, Any]], Awaitable[Any]],
) -> Any:
    """Apply the ``mcp:`` section's decision (:mod:`.gating`) before relaying."""
    if decision == "allow":
        return await run(args)
    proxy = session.proxy
    call = ToolCall(tool, args, id=new_id("mcp"))
    section = "resources" if tool == READ_TOOL else "prompts"
    if decision == "deny":
        reason = f"{tool} {next(iter(args.values()))!s} is denied by mcp.{section} {key!r}"
        audit_refusal(proxy.gate, call, proxy._context(ctx, None), f"mcp.{section}", reason)
        raise MCPError(code=types.INVALID_REQUEST, message=f"Refused: {reason}.")
    return await proxy.gated(ctx, call, run)


async def subscribe(ctx: Ctx, params: types.SubscribeRequestParams) -> Any:
    """Relayed, and remembered so a restarted upstream is subscribed again."""
    session = await _session(ctx)
    link, uri = await session.pool.catalog.resource_route(str(params.uri))
    request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
    result = await _client(link).session.send_request(request, types.EmptyResult)
    session.pool.subscriptions.add(link, uri, str(params.uri))
    return result


async def unsubscribe(ctx: Ctx, params: types.UnsubscribeRequestParams) -> Any:
    session = await _session(ctx)
    link, uri = await session.pool.catalog.resource_route(str(params.uri))
    session.pool.subscriptions.discard(link, uri)
    request = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
    return await _client(link).session.send_request(request, types.EmptyResult)


async def complete(ctx: Ctx, params: types.CompleteRequestParams) -> Any:
    session = await _session(ctx)
    catalog = session.pool.catalog
    ref = params.ref
    if isinstance(ref, types.PromptReference):
        link, name = await catalog.prompt_route(ref.name)
        ref = ref.model_copy(update={"name": name})
    else:
        link, uri = await catalog.resource_route(ref.uri)
        ref = ref.model_copy(update={"uri": uri})
    return await _client(link).session.complete(
        ref, params.argument.model_dump(), context_arguments=_context_args(params)
    )


async def set_logging_level(ctx: Ctx, params: types.SetLevelRequestParams) -> Any:
    session = await _session(ctx)
    sent = False
    for link in session.pool.links:
        if link.client is not None and link.capabilities.logging is not None:
            request = types.SetLevelRequest(params=params)
            await link.client.session.send_request(request, types.EmptyResult)
            sent = True
    if not sent:
        raise MCPError(code=types.METHOD_NOT_FOUND, message="no upstream supports logging")
    return types.EmptyResult()


async def roots_changed(ctx: Ctx, params: types.NotificationParams | None) -> None:
    hub = ctx.lifespan_context
    session = hub.find(ctx)
    if session is None:
        return
    for link in session.pool.links:
        if link.client is not None:
            await link.client.session.send_notification(types.RootsListChangedNotification())


def _context_args(params: types.CompleteRequestParams) -> dict[str, str] | None:
    context = params.context
    return dict(context.arguments) if context is not None and context.arguments else None


def register(server: Server[Any]) -> None:
    """Add the pass-through handlers (capabilities are mirrored separately)."""
    server.add_request_handler("prompts/list", types.PaginatedRequestParams, list_prompts)
    server.add_request_handler("prompts/get", types.GetPromptRequestParams, get_prompt)
    server.add_request_handler("resources/list", types.PaginatedRequestParams, list_resources)
    server.add_request_handler(
        "resources/templates/list", types.PaginatedRequestParams, list_templates
    )
    server.add_request_handler("resources/read", types.ReadResourceRequestParams, read_resource)
    server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)
    server.add_request_handler("completion/complete", types.CompleteRequestParams, complete)
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_logging_level)
    server.add_notification_handler(
        "notifications/roots/list_changed", types.NotificationParams, roots_changed
    )
