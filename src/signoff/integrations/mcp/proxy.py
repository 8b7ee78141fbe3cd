"""``signoff mcp-proxy``: put human sign-off in front of any MCP server.

The proxy is an MCP server to the client and an MCP client to each upstream. ``tools/list``
passes through (prefixed with several upstreams); every ``tools/call`` takes the gate's one
path — schema (the upstream's ``inputSchema``), validators, policy — and then:

* allow → forwarded, progress relayed;
* deny → an ``isError`` result naming the rule (never a protocol error);
* require_approval → the request is stored and approvers notified, and the call is *held*
  with progress heartbeats carrying the request id and where to answer; where the rule lets
  the agent's own user decide, the client is asked too (elicitation). The first decision
  wins: approve/edit → forwarded exactly once (the upstream's timeout starts only then);
  reject, deadline, no human → an ``isError`` result the model can act on.

A client that cancels or disconnects cancels the pending request (audited; approvers'
prompts are withdrawn) and any upstream call. Anything that keeps a held call from being
recorded or announced fails closed: the tool does not run.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError

from signoff.gate import Gate, messages
from signoff.integrations.mcp import elicitation, texts
from signoff.integrations.mcp.catalog import DEFAULT_TTL, Route
from signoff.integrations.mcp.gating import Gating
from signoff.integrations.mcp.link import BACKOFF_ATTEMPTS, DEFAULT_CONNECT_TIMEOUT
from signoff.integrations.mcp.pool import UpstreamPool
from signoff.integrations.mcp.progress import ProgressChannel
from signoff.integrations.mcp.relay import client_left
from signoff.integrations.mcp.safeguards import (
    audit_refusal,
    notification_failures,
    refusal,
    withdraw,
    withdrawn_on_cancel,
)
from signoff.integrations.mcp.sealed import SealedStates
from signoff.integrations.mcp.timeouts import warn_if_client_gives_up_first
from signoff.integrations.mcp.waiting import hold
from signoff.model import (
    AlreadyDecided,
    AlreadyExecuted,
    ApprovalRequest,
    CallContext,
    SignoffError,
    ToolCall,
    Verdict,
    new_id,
)

log = logging.getLogger("signoff.mcp")
T = TypeVar("T")

ACTOR = "signoff-mcp"
CLIENT_GONE = "the MCP client cancelled the call or disconnected"
UPSTREAM_GONE = "the MCP server behind the proxy stopped; the call could not run"


@dataclass(slots=True)
class ProxyOptions:
    """How the proxy behaves; the CLI fills it from flags."""

    principal: str = "anonymous"
    thread: str | None = None  # default: one thread per client connection
    agent: str | None = None  # default: the client's own name
    heartbeat_s: float = 5.0
    upstream_timeout_s: float | None = None
    in_client: bool = True  # offer elicitation where the rule allows self-approval
    state_keys: Sequence[bytes | str] | None = None  # share across instances; default per process
    client_wait_s: float | None = None  # the client's tool timeout, for the tier warning
    name: str = "signoff-proxy"
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT  # the upstream handshake
    per_session: bool = False  # HTTP: one session (thread, upstreams) per client session
    max_sessions: int = 16
    listing_ttl_s: float = DEFAULT_TTL
    upstream_restarts: int = BACKOFF_ATTEMPTS  # then the upstream stays down
    upstream_mode: str = "auto"


class ApprovalProxy:
    """One client connection's proxy: routes, gates, holds and forwards tool calls."""

    def __init__(
        self,
        gate: Gate,
        pool: UpstreamPool,
        options: ProxyOptions,
        sealed: SealedStates,
        thread: str | None = None,
    ) -> None:
        self.gate = gate
        self.pool = pool
        self.options = options
        self.sealed = sealed
        self.thread = options.thread or thread or new_id("mcp")
        self.gating = Gating.from_policy(gate.policy)
        self._contexts: dict[tuple[str | None, str], CallContext] = {}
        self._warned = False

    # ------------------------------------------------------------------ listing
    async def list_tools(self) -> list[types.Tool]:
        tools = await self.pool.list_tools()
        for tool in tools:
            self._register(tool)
        return tools

    def _register(self, tool: types.Tool) -> None:
        info = self.gate.tools.get(tool.name)
        if (
            info is not None
            and info.schema is not None
            and info.schema.json_schema == tool.input_schema
        ):
            return
        try:
            self.gate.tool(tool.name, schema=tool.input_schema)
        except Exception as exc:  # an upstream's broken schema: the policy still applies
            log.warning("tool %s has an unusable inputSchema (%s); not validated", tool.name, exc)

    async def _route(self, name: str) -> Route | None:
        route = await self.pool.route(name)  # lists again once for a name not seen yet
        if route is not None:
            self._register(route.listed)
        return route

    # ------------------------------------------------------------------ calling
    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        """Gate one ``tools/call``; an allowed call's result is relayed as the upstream
        sent it (a dict from the lean HTTP leg)."""
        name, args = params.name, dict(params.arguments or {})
        route = await self._route(name)
        call_ctx = self._context(ctx, route)
        if params.request_state is not None:
            return await self._resume(ctx, params, route, call_ctx)
        call = ToolCall(name, args, id=new_id("mcp"))
        if route is None:
            audit_refusal(self.gate, call, call_ctx, "mcp.unknown_tool", "no upstream offers it")
            return refusal(texts.unknown_tool(name, self.pool.tool_names), rule="mcp.unknown_tool")
        try:
            verdict = self.gate.check(call, call_ctx)
            if verdict.judge_pending:  # an intent judge answers before anything runs
                verdict = await self.gate.ajudge(call, call_ctx, verdict)
        except Exception as exc:  # the audit queue refused: fail closed
            return refusal(texts.store_unavailable(name, exc), rule="store")
        if verdict.allowed:
            self.gate.record_execution(call, call_ctx)
            return await self._forward(route, args, ProgressChannel(ctx))
        if verdict.denied:
            return refusal(messages.denied(name, verdict), rule=verdict.rule)
        link = self.pool.link(route.upstream)
        if not link.up:  # never ask a human to approve a call that cannot run
            return refusal(texts.upstream_down(name, link.state.reason or "not connected"))
        return await self._held(ctx, route, call, verdict, call_ctx)

    async def _held(
        self,
        ctx: ServerRequestContext[Any, Any],
        route: Route,
        call: ToolCall,
        verdict: Verdict,
        call_ctx: CallContext,
    ) -> types.CallToolResult | types.InputRequiredResult:
        try:
            # Shielded: once stored, the request's id must reach the guard below, or a client
            # leaving at this moment would leave it pending for a human to approve.
            with anyio.CancelScope(shield=True):
                sub = await self.gate.asubmit_checked([call], [verdict], call_ctx)
            assert sub.request is not None
            req = sub.request
        except Exception as exc:
            log.error("cannot record the approval request for %s: %s", call.name, exc)
            return refusal(texts.store_unavailable(call.name, exc), rule=verdict.rule)
        progress = ProgressChannel(ctx)
        async with withdrawn_on_cancel(self.gate, req.id, actor=ACTOR, reason=CLIENT_GONE):
            held = await self._announce_and_hold(ctx, route, call, req, progress)
        if not isinstance(held, ApprovalRequest):
            return held
        return await self._finish(route, held, call.id, progress, call_ctx)

    async def _announce_and_hold(
        self,
        ctx: ServerRequestContext[Any, Any],
        route: Route | None,
        call: ToolCall,
        req: ApprovalRequest,
        progress: ProgressChannel,
        *,
        in_client_allowed: bool = True,
    ) -> types.CallToolResult | types.InputRequiredResult | ApprovalRequest:
        """Check someone was told, then wait for the decision (or ask in the client, 2026)."""
        try:
            failures = await notification_failures(self.gate, req) if req.pending else []
        except Exception as exc:
            log.error("cannot read the notifications of %s: %s", req.id, exc)
            await self._withdraw(req.id, "the approval system is unavailable")
            return refusal(texts.store_unavailable(call.name, exc), request_id=req.id)
        if failures:
            await self._withdraw(req.id, "no approver could be notified")
            return refusal(texts.nobody_notified(call.name, failures), request_id=req.id)
        in_client = in_client_allowed and req.pending and self._may_ask_in_client(ctx, req)
        if in_client and elicitation.is_modern(ctx):
            await progress.beat(
                texts.held(self.gate.policy, req), texts.held_meta(self.gate.policy, req)
            )
            state = self.sealed.mint(req.id, call.id, req.expires_at)
            prompt = texts.approval_prompt(self.gate.policy, req)
            return elicitation.input_required(
                elicitation.APPROVAL_KEY, prompt, elicitation.APPROVAL_SCHEMA, state
            )
        try:
            return await self._hold(ctx, route, req, progress, prompt=in_client)
        except Exception as exc:
            return refusal(texts.store_unavailable(call.name, exc), request_id=req.id)

    async def _resume(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.CallToolRequestParams,
        route: Route | None,
        call_ctx: CallContext,
    ) -> types.CallToolResult:
        """A 2026 retry carrying an in-client answer (the state was verified by the seal)."""
        ticket = self.sealed.redeem(params.request_state)
        args = dict(params.arguments or {})
        req = await self._get(ticket.request_id) if ticket else None
        if ticket is None or req is None or route is None or not _same_call(req, ticket, params):
            call = ToolCall(params.name, args, id=ticket.call_id if ticket else new_id("mcp"))
            audit_refusal(
                self.gate, call, call_ctx, "mcp.answer_refused", "replayed or unknown state"
            )
            return refusal(texts.answer_refused(params.name), rule="mcp.answer_refused")
        answer = elicitation.answer_in(params, elicitation.APPROVAL_KEY)
        decision = elicitation.approval_decision(answer, ticket.call_id) if answer else None
        if decision is not None and req.pending:
            req = await self._decide_in_client(req, decision)
        progress = ProgressChannel(ctx)
        if req.pending:  # dismissed in the client: an out-of-band approver may still decide
            try:
                async with withdrawn_on_cancel(self.gate, req.id, actor=ACTOR, reason=CLIENT_GONE):
                    req = await self._hold(ctx, route, req, progress, prompt=False)
            except Exception as exc:
                return refusal(texts.store_unavailable(params.name, exc), request_id=req.id)
        return await self._finish(route, req, ticket.call_id, progress, call_ctx)

    # ------------------------------------------------------------------ other requests
    async def gated(
        self,
        ctx: ServerRequestContext[Any, Any],
        call: ToolCall,
        run: Callable[[dict[str, Any]], Awaitable[T]],
    ) -> T:
        """A resource read or prompt get the ``mcp:`` section sends to the gate, as a call of
        a pseudo-tool: allowed or approved → ``run(args)`` once (with edited args after an
        edit); denied, rejected, expired → an MCP error with the reason."""
        call_ctx = self._context(ctx, None)
        try:
            verdict = self.gate.check(call, call_ctx)
            if verdict.judge_pending:
                verdict = await self.gate.ajudge(call, call_ctx, verdict)
        except Exception as exc:  # the audit queue refused: fail closed
            raise _refused(texts.store_unavailable(call.name, exc)) from None
        if verdict.allowed:
            self.gate.record_execution(call, call_ctx)
            return await run(dict(call.args))
        if verdict.denied:
            raise _refused(messages.denied(call.name, verdict))
        try:
            with anyio.CancelScope(shield=True):
                sub = await self.gate.asubmit_checked([call], [verdict], call_ctx)
            assert sub.request is not None
            req = sub.request
        except Exception as exc:
            raise _refused(texts.store_unavailable(call.name, exc)) from None
        progress = ProgressChannel(ctx)
        async with withdrawn_on_cancel(self.gate, req.id, actor=ACTOR, reason=CLIENT_GONE):
            held = await self._announce_and_hold(
                ctx, None, call, req, progress, in_client_allowed=False
            )
        if not isinstance(held, ApprovalRequest):
            raise _refused(_error_text(held) if isinstance(held, types.CallToolResult) else "")
        state = held.call(call.id)
        if not state.runnable:
            raise _refused(messages.outcome_text(held, state))
        await self.gate.aclaim(held.id, call.id, actor=ACTOR)
        args = dict(state.action.args)
        try:
            result = await run(args)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await self._ledger(held.id, call.id, _describe(exc))
            raise
        await self._ledger(held.id, call.id, None)
        self.gate.record_execution(ToolCall(call.name, args, id=call.id), call_ctx)
        return result

    # ------------------------------------------------------------------ holding
    async def _hold(
        self,
        ctx: ServerRequestContext[Any, Any],
        route: Route | None,
        req: ApprovalRequest,
        progress: ProgressChannel,
        *,
        prompt: bool,
    ) -> ApprovalRequest:
        """Wait for the first decision with heartbeats (and, 2025 era, an in-client prompt
        beside it). Each heartbeat also checks that someone can still receive the result:
        an upstream that is gone, or an HTTP client that went away without cancelling,
        withdraws the request instead of leaving it for a human."""
        if self.options.client_wait_s is not None and not self._warned:
            self._warned = warn_if_client_gives_up_first(req, self.options.client_wait_s)
        gone: list[str] = []

        async def beat(current: ApprovalRequest) -> None:
            reason = await self._nobody_to_run_for(ctx, route)
            if reason:
                gone.append(reason)
                scope.cancel()
                return
            meta = texts.held_meta(self.gate.policy, current)
            await progress.beat(texts.held(self.gate.policy, current), meta)

        async def ask() -> None:
            await self._prompt_in_client(ctx, req)

        with anyio.CancelScope() as scope:
            return await hold(
                self.gate,
                req,
                beat=beat,
                every=self.options.heartbeat_s,
                beside=ask if prompt else None,
            )
        await self._withdraw(req.id, gone[0])
        return await self.gate.get(req.id)

    async def _nobody_to_run_for(
        self, ctx: ServerRequestContext[Any, Any], route: Route | None
    ) -> str | None:
        """Why a held call can no longer run or be received (None: it still can)."""
        if route is not None and not await self.pool.link(route.upstream).alive():
            return UPSTREAM_GONE
        if await client_left(ctx):
            return CLIENT_GONE
        return None

    async def _prompt_in_client(
        self, ctx: ServerRequestContext[Any, Any], req: ApprovalRequest
    ) -> None:
        prompt = texts.approval_prompt(self.gate.policy, req)
        result = await elicitation.push(ctx, prompt, elicitation.APPROVAL_SCHEMA)
        decision = (
            elicitation.approval_decision(result, req.calls[0].tool_call_id) if result else None
        )
        if decision is not None:  # None: dismissed — keep waiting for another approver
            await self._decide_in_client(req, decision)

    async def _decide_in_client(
        self, req: ApprovalRequest, decision: dict[str, Any]
    ) -> ApprovalRequest:
        """The agent's own user decided in the client: their decision, channel ``mcp``."""
        try:
            return await self.gate.adecide(
                req.id, [decision], approver=self.options.principal, channel="mcp"
            )
        except AlreadyDecided:
            pass  # someone else was first; their decision stands
        except SignoffError as exc:
            log.warning("in-client decision on %s not accepted: %s", req.id, exc)
        return await self.gate.get(req.id)

    def _may_ask_in_client(self, ctx: ServerRequestContext[Any, Any], req: ApprovalRequest) -> bool:
        return (
            self.options.in_client
            and len(req.calls) == 1
            and elicitation.can_elicit_form(ctx)
            and elicitation.self_approvable(self.gate, req, self.options.principal)
        )

    async def _get(self, request_id: str) -> ApprovalRequest | None:
        try:
            return await self.gate.get(request_id)
        except SignoffError:
            return None

    async def _withdraw(self, request_id: str, reason: str) -> None:
        await withdraw(self.gate, request_id, actor=ACTOR, reason=reason)

    # ------------------------------------------------------------------ running
    async def _finish(
        self,
        route: Route,
        req: ApprovalRequest,
        call_id: str,
        progress: ProgressChannel,
        call_ctx: CallContext,
    ) -> types.CallToolResult:
        """Run an approved/edited call exactly once, or say why it did not run."""
        state = req.call(call_id)
        outcome = {"request_id": req.id, "resolution": state.resolution, "by": state.resolved_by}
        if not state.runnable:
            return refusal(messages.outcome_text(req, state), **outcome)
        try:
            await self.gate.aclaim(req.id, call_id, actor=ACTOR)
        except AlreadyExecuted as exc:
            return refusal(str(exc), **outcome)
        except Exception as exc:
            return refusal(texts.store_unavailable(route.listed.name, exc), **outcome)
        args = dict(state.action.args)
        try:
            result = _as_model(await self._forward(route, args, progress))
        except BaseException as exc:
            gone = isinstance(exc, anyio.get_cancelled_exc_class())
            with anyio.CancelScope(shield=True):
                await self._ledger(req.id, call_id, CLIENT_GONE if gone else _describe(exc))
            raise
        await self._ledger(req.id, call_id, _error_text(result) if result.is_error else None)
        self.gate.record_execution(ToolCall(route.listed.name, args, id=call_id), call_ctx)
        if state.resolution == "edited":
            note = types.TextContent(type="text", text=texts.edit_note(route.listed.name, args))
            result = result.model_copy(update={"content": [note, *result.content]})
        return result

    async def _ledger(self, request_id: str, call_id: str, error: str | None) -> None:
        try:
            await self.gate.afinish(request_id, call_id, error=error, actor=ACTOR)
        except Exception as exc:
            log.error("could not record the execution of %s: %s", call_id, exc)

    async def _forward(
        self, route: Route, args: dict[str, Any], progress: ProgressChannel
    ) -> types.CallToolResult | dict[str, Any]:
        progress.start_relay()
        return await self.pool.call(
            route, args, progress=progress.relay, timeout=self.options.upstream_timeout_s
        )

    # ------------------------------------------------------------------ helpers
    def _context(self, ctx: ServerRequestContext[Any, Any], route: Route | None) -> CallContext:
        agent = self.options.agent or elicitation.client_name(ctx) or "mcp-client"
        upstream = route.upstream if route is not None else ""
        key = (agent, upstream)
        found = self._contexts.get(key)
        if found is None:
            base = CallContext(attrs={"mcp_upstream": upstream} if upstream else {})
            found = self.gate.make_context(
                self.options.principal, base=base, thread=self.thread, agent=agent
            )
            self._contexts[key] = found
        return found


def _as_model(result: types.CallToolResult | dict[str, Any]) -> types.CallToolResult:
    if isinstance(result, dict):
        return types.CallToolResult.model_validate(result, by_name=False)
    return result


def _same_call(req: ApprovalRequest, ticket: Any, params: types.CallToolRequestParams) -> bool:
    try:
        action = req.action_request(ticket.call_id)
    except KeyError:
        return False
    return action.name == params.name and action.args == dict(params.arguments or {})


def _refused(text: str) -> MCPError:
    return MCPError(code=types.INVALID_REQUEST, message=text or "refused by signoff")


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def _error_text(result: types.CallToolResult) -> str:
    text = " ".join(c.text for c in result.content if isinstance(c, types.TextContent))
    return (text or "the tool returned an error")[:500]
