"""``signoff inquiry-server``: a human as an MCP tool.

``send_inquiry`` turns the model's question into an inquiry request in the store (``kind:
inquiry``), announces it at once in a progress notification whose ``_meta`` carries
``{inquiryId, question, type: "INQUIRY"}`` (so a thin client can render it straight from the
stream), asks in the client too where it can, and waits. Anyone may answer — web inbox, any
channel, ``signoff respond``, or ``answer_inquiry`` on this server from another session (never
the one that asked: :mod:`~signoff.integrations.mcp.inquiry_answering`); the first answer wins
and the other prompts are withdrawn. ``questions`` asks a form in one round; its answer is an
object keyed by question id.

The result is data, not an error: ``{status, answer, inquiry_id, waited_s}`` with a text that
tells the model what to do when nobody answered (keep going; do not ask again). For long waits,
``start_inquiry`` returns the id at once and ``get_answer`` collects the answer later.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext

from signoff import __version__
from signoff.checks import schema_for
from signoff.gate import Gate
from signoff.gate.inquiry_judge import suggested
from signoff.integrations.mcp import elicitation, texts
from signoff.integrations.mcp.inquiry_answering import (
    AnswerTool,
    Sessions,
    answer_refusal,
    offers_answer_tool,
)
from signoff.integrations.mcp.inquiry_tools import TOOLS, InquiryResult, result_of, status_of
from signoff.integrations.mcp.progress import ProgressChannel
from signoff.integrations.mcp.relay import client_left
from signoff.integrations.mcp.safeguards import withdraw
from signoff.integrations.mcp.sealed import SealedStates
from signoff.integrations.mcp.waiting import hold
from signoff.judges.base import JudgeError
from signoff.judges.inquiry import InquiryQuestion, InquiryReply
from signoff.model import (
    AlreadyDecided,
    ApprovalRequest,
    CallContext,
    InvalidInput,
    SignoffError,
    make_inquiry,
    new_id,
)

log = logging.getLogger("signoff.mcp")

Suggester = Callable[[str, Sequence[str] | None], Awaitable[str | None]]
"""Fills ``default_answer`` when the agent gave none (e.g. a second model's best guess);
``None`` means no suggestion. Errors are logged and ignored."""

ACTOR = "signoff-inquiry"
CLIENT_LEFT = "the MCP client disconnected"
CANCELLED = "the MCP client cancelled the call"

#: How long a ``--suggester`` may take before the inquiry is stored without a suggestion.
SUGGEST_TIMEOUT_S = 10.0


class SuggesterAnswerer:
    """A ``--suggester`` function ``(question, choices) -> str | None`` as an inquiry answerer
    (what every judge kind is for ``inquiries.suggest``)."""

    def __init__(self, function: Suggester) -> None:
        self.function = function
        self.name = getattr(function, "__qualname__", "suggester")

    async def answer_inquiry(self, question: InquiryQuestion) -> InquiryReply:
        found = await self.function(question.question, question.choices)
        if not isinstance(found, str):
            raise JudgeError("no suggestion" if found is None else "the suggestion is not a string")
        return InquiryReply(answer=found)


@dataclass(slots=True)
class InquiryOptions:
    """How the inquiry server behaves; the CLI fills it from flags."""

    principal: str = "anonymous"  # who the agent acts for; answers via answer_inquiry are theirs
    thread: str | None = None
    agent: str | None = None
    default_timeout_s: float = 300.0
    max_timeout_s: float = 3600.0
    max_wait_s: float = 60.0  # longest single get_answer wait
    heartbeat_s: float = 5.0
    in_client: bool = True
    suggester: Suggester | None = None
    state_keys: Sequence[bytes | str] | None = None
    name: str = "signoff-inquiry"
    answer_tool: AnswerTool = "other-sessions"  # who may call answer_inquiry
    many_sessions: bool = False  # served over HTTP: other clients (a phone) may connect


class InquiryService:
    """The tools' behaviour, over one gate."""

    def __init__(
        self,
        gate: Gate,
        options: InquiryOptions,
        sealed: SealedStates,
        sessions: Sessions | None = None,
    ) -> None:
        self.gate = gate
        self.options = options
        self.sealed = sealed
        self.sessions = sessions or Sessions()
        self.thread = options.thread or new_id("inquiry")
        self._validators = {tool.name: schema_for(tool.input_schema) for tool in TOOLS}

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        args = dict(params.arguments or {})
        check = self._validators.get(params.name)
        if check is None:
            return _error(f"Unknown tool `{params.name}`; use send_inquiry or get_answer.")
        errors = check.errors(args)
        if errors:
            return _error(f"Invalid arguments for {params.name}: " + "; ".join(errors))
        if params.name == "answer_inquiry":
            return await self.answer(ctx, args)
        if params.name == "get_answer":
            return await self.get_answer(ctx, args["inquiry_id"], float(args.get("wait_s", 0)))
        if params.request_state is not None:
            return await self._resume(ctx, params)
        return await self.ask(ctx, args, wait=params.name == "send_inquiry")

    def tools(self, ctx: ServerRequestContext[Any, Any]) -> list[types.Tool]:
        """The tools this session sees: ``answer_inquiry`` only where it may use it."""
        offered = offers_answer_tool(
            self.options.answer_tool,
            many_sessions=self.options.many_sessions,
            session=self.sessions.of(ctx),
        )
        return [t for t in TOOLS if offered or t.name != "answer_inquiry"]

    # ------------------------------------------------------------------ asking
    async def ask(
        self, ctx: ServerRequestContext[Any, Any], args: dict[str, Any], *, wait: bool
    ) -> types.CallToolResult | types.InputRequiredResult:
        question = args.get("question")
        choices = args.get("choices") or None
        default = args.get("default_answer")
        allow_other = bool(args.get("allow_other", False))
        if default is None and question is not None and "questions" not in args:
            default = await self._suggest(str(question), choices, allow_other)
        timeout = self._timeout(args.get("timeout_s"))
        try:
            req = await self.gate.aask(
                question,
                choices=choices,
                default_answer=default,
                allow_other=allow_other,
                questions=args.get("questions"),
                format=args.get("format", "text"),
                timeout=timeout,
                ctx=self._context(ctx),
                wait=False,
            )
        except InvalidInput as exc:
            return _error(f"Invalid arguments for send_inquiry: {exc}")
        except Exception as exc:  # fail closed: nobody can be asked
            log.error("cannot record the inquiry: %s", exc)
            return result_of_unavailable(str(exc))
        assert isinstance(req, ApprovalRequest) and req.inquiry is not None
        self.sessions.asked(req.id, self.sessions.of(ctx))
        progress = ProgressChannel(ctx)
        await self._announce(progress, req)
        if not wait or not req.pending:
            return result_of(req)
        in_client = self.options.in_client and elicitation.can_elicit_form(ctx)
        if in_client and elicitation.is_modern(ctx):
            state = self.sealed.mint(req.id, req.calls[0].tool_call_id, req.expires_at)
            schema = elicitation.answer_schema(req.inquiry)
            return elicitation.input_required(
                elicitation.ANSWER_KEY, elicitation.prompt_of(req.inquiry), schema, state
            )
        return await self._wait(ctx, req, progress, prompt=in_client, withdraw=True)

    async def _resume(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """A 2026 retry with the client's answer; the state was verified by the seal."""
        ticket = self.sealed.redeem(params.request_state)
        req = await self._get(ticket.request_id) if ticket else None
        if ticket is None or req is None:
            return _error(
                "This answer was not accepted: it was already used, expired, or not issued by "
                "this server. Keep working with what you have; do not ask again."
            )
        reply = elicitation.answer_in(params, elicitation.ANSWER_KEY)
        if req.pending and req.inquiry is not None:
            decision = (
                elicitation.answer_decision(reply, ticket.call_id, req.inquiry) if reply else None
            )
            if decision is None:  # dismissed in the client: the question is withdrawn
                await self._withdraw(req.id, "dismissed in the MCP client")
            else:
                await self._decide(req, decision)
            req = await self._get(req.id) or req
        if req.pending:  # the answer was not accepted: wait for another device
            return await self._wait(ctx, req, ProgressChannel(ctx), withdraw=True)
        return result_of(req)

    async def get_answer(
        self, ctx: ServerRequestContext[Any, Any], inquiry_id: str, wait_s: float
    ) -> types.CallToolResult:
        req = await self._get(inquiry_id)
        if req is None or req.kind != "inquiry":
            return _error(f"No inquiry with id {inquiry_id!r}.")
        wait = max(0.0, min(wait_s, self.options.max_wait_s))
        if req.pending and wait > 0:
            # A client that gives up on get_answer leaves the question open: that is the point
            # of the non-blocking variant.
            return await self._wait(ctx, req, ProgressChannel(ctx), limit=wait)
        if req.terminal:
            self.sessions.forget(req.id)
        return result_of(req)

    async def answer(
        self, ctx: ServerRequestContext[Any, Any], args: dict[str, Any]
    ) -> types.CallToolResult:
        """``answer_inquiry``: another session answers (as this server's principal); never
        the session that asked (:func:`answer_refusal`)."""
        inquiry_id = str(args["inquiry_id"])
        req = await self._get(inquiry_id)
        if req is None or req.kind != "inquiry":
            return _error(f"No inquiry with id {inquiry_id!r}.")
        refused = answer_refusal(
            self.options.answer_tool,
            many_sessions=self.options.many_sessions,
            asking=self.sessions.asker(req.id),
            answering=self.sessions.of(ctx),
        )
        if refused is not None:
            return _error(f"Not recorded: {refused}")
        decision: dict[str, Any] = {"tool_call_id": req.calls[0].tool_call_id, "type": "respond"}
        if "answer" in args:
            decision["message"] = args["answer"]
        if "answers" in args:
            decision["answers"] = args["answers"]
        try:
            req = await self.gate.adecide(
                req.id, [decision], approver=self.options.principal, channel="mcp"
            )
        except AlreadyDecided as exc:
            return _answer_result(False, await self._get(req.id) or req, f"Not recorded: {exc}")
        except SignoffError as exc:
            return _error(f"Not recorded: {exc}")
        if req.terminal:  # nobody can answer it any more: who asked no longer matters
            self.sessions.forget(req.id)
        return _answer_result(True, req, f"Answer recorded for inquiry {req.id}.")

    # ------------------------------------------------------------------ helpers
    async def _wait(
        self,
        ctx: ServerRequestContext[Any, Any],
        req: ApprovalRequest,
        progress: ProgressChannel,
        *,
        prompt: bool = False,
        withdraw: bool = False,
        limit: float | None = None,
    ) -> types.CallToolResult:
        left: list[str] = []

        async def beat(current: ApprovalRequest) -> None:
            # A 2025-11-25 HTTP client that vanished does not cancel the handler: withdraw.
            if withdraw and await client_left(ctx):
                left.append(CLIENT_LEFT)
                scope.cancel()
                return
            await self._announce(progress, current)

        async def ask_in_client() -> None:
            inquiry = req.inquiry
            assert inquiry is not None
            schema = elicitation.answer_schema(inquiry)
            reply = await elicitation.push(ctx, elicitation.prompt_of(inquiry), schema)
            call_id = req.calls[0].tool_call_id
            decision = elicitation.answer_decision(reply, call_id, inquiry) if reply else None
            if decision is not None:
                await self._decide(req, decision)
            elif reply is not None:  # dismissed: withdraw the question
                await self._withdraw(req.id, "dismissed in the MCP client")

        try:
            with anyio.CancelScope() as scope:
                final = await hold(
                    self.gate,
                    req,
                    beat=beat,
                    every=self.options.heartbeat_s,
                    beside=ask_in_client if prompt else None,
                    limit=limit,
                    withdraw=(lambda rid: self._withdraw(rid, left[0] if left else CANCELLED))
                    if withdraw
                    else None,
                )
            if left:  # withdrawn by hold() as the scope was cancelled
                final = await self.gate.get(req.id)
        except Exception as exc:
            return result_of_unavailable(str(exc), req.id)
        if final.terminal:
            self.sessions.forget(final.id)
        return result_of(final)

    async def _announce(self, progress: ProgressChannel, req: ApprovalRequest) -> None:
        inquiry = req.inquiry
        assert inquiry is not None
        meta: dict[str, Any] = {
            "inquiryId": req.id,
            "question": inquiry.question,
            "type": "INQUIRY",
            "choices": inquiry.choices,
            "defaultAnswer": inquiry.default_answer,
            "format": inquiry.format,
            "expiresAt": req.expires_at.isoformat(),
            "answerUrl": texts.approval_url(self.gate.policy, req.id),
        }
        if inquiry.questions is not None:
            meta["questions"] = [q.model_dump() for q in inquiry.questions]
        text = (
            f"Question for a human (inquiry {req.id}): {inquiry.question} — "
            f"{texts.where_to_answer(self.gate.policy, req.id, 'respond')}."
        )
        await progress.beat(text, meta)

    async def _decide(self, req: ApprovalRequest, decision: dict[str, Any]) -> None:
        try:
            await self.gate.adecide(
                req.id, [decision], approver=self.options.principal, channel="mcp"
            )
        except AlreadyDecided:
            pass  # another device answered first
        except SignoffError as exc:
            log.warning("in-client answer to %s not accepted: %s", req.id, exc)

    async def _withdraw(self, request_id: str, reason: str) -> None:
        await withdraw(self.gate, request_id, actor=ACTOR, reason=reason)

    async def _get(self, request_id: str) -> ApprovalRequest | None:
        try:
            return await self.gate.get(request_id)
        except SignoffError:
            return None

    async def _suggest(
        self, question: str, choices: list[str] | None, allow_other: bool
    ) -> str | None:
        """``--suggester``: an alias of ``inquiries.suggest`` — the same code path
        (:func:`~signoff.gate.inquiry_judge.suggested`), with the function as the answerer.
        Without the flag the gate's own ``inquiries.suggest`` applies when the inquiry is
        made."""
        if self.options.suggester is None:
            return None
        try:
            inquiry = make_inquiry(question, choices=choices, allow_other=allow_other)
        except InvalidInput:
            return None  # the gate refuses the question itself, naming the field
        answerer = SuggesterAnswerer(self.options.suggester)
        ctx = {"principal": self.options.principal, "agent": self.options.agent}
        found = await suggested(answerer, inquiry, ctx, SUGGEST_TIMEOUT_S)
        return found.default_answer

    def _timeout(self, value: Any) -> float:
        seconds = float(value) if value is not None else self.options.default_timeout_s
        return max(1.0, min(seconds, self.options.max_timeout_s))

    def _context(self, ctx: ServerRequestContext[Any, Any]) -> CallContext:
        agent = self.options.agent or elicitation.client_name(ctx) or "mcp-client"
        return self.gate.make_context(
            self.options.principal, base=CallContext(), thread=self.thread, agent=agent
        )


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def result_of_unavailable(reason: str, inquiry_id: str = "") -> types.CallToolResult:
    """Fail closed: the question could not be recorded or followed, so nobody will answer."""
    log.warning("inquiry unavailable: %s", reason)
    return InquiryResult("unavailable", None, inquiry_id, 0.0).to_tool_result()


def _answer_result(accepted: bool, req: ApprovalRequest, text: str) -> types.CallToolResult:
    structured = {"accepted": accepted, "inquiry_id": req.id, "status": status_of(req)[0]}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured
    )


def build_inquiry_server(
    gate: Gate, options: InquiryOptions | None = None
) -> Server[InquiryService]:
    """The inquiry server as a low-level MCP server (stdio, HTTP or in memory)."""
    opts = options or InquiryOptions()
    sealed = SealedStates(audience=opts.name, keys=opts.state_keys, ttl=opts.max_timeout_s + 60)
    sessions = Sessions()  # shared by every connection of this server

    @asynccontextmanager
    async def lifespan(_server: Server[InquiryService]) -> AsyncIterator[InquiryService]:
        yield InquiryService(gate, opts, sealed, sessions)

    async def on_list_tools(
        ctx: ServerRequestContext[InquiryService], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=ctx.lifespan_context.tools(ctx))

    async def on_call_tool(
        ctx: ServerRequestContext[InquiryService], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        return await ctx.lifespan_context.call_tool(ctx, params)

    server: Server[InquiryService] = Server(
        opts.name,
        version=__version__,
        instructions="send_inquiry asks the human user a question and waits for the answer. "
        "Ask only when you cannot proceed correctly without information only the user has; "
        "never ask the same question twice.",
        lifespan=lifespan,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )
    server.middleware.append(sealed.boundary)
    return server


__all__ = ["InquiryOptions", "InquiryService", "Suggester", "build_inquiry_server"]
