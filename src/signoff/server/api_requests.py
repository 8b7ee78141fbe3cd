"""``/v1/requests``: agents submit and wait; approvers list, read and decide.

Every handler authenticates first, then authorizes with :mod:`.access`, then calls the
gate's public async API. Errors from the gate become HTTP answers in :mod:`.errors`
(DecisionError 422, NotAuthorized 403, AlreadyDecided 409, NotFound 404, StoreError 503).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from signoff.checks.limits import check_submission
from signoff.gate import request_context
from signoff.gate.principals import UNKNOWN_PRINCIPAL, unknown_principal
from signoff.model import (
    AlreadyDecided,
    ApprovalRequest,
    CallContext,
    RequestQuarantined,
    ToolCall,
    utcnow,
)
from signoff.server.access import may_cancel, may_see, require_agent, require_approver
from signoff.server.actions import decide, visible_request
from signoff.server.bodies import (
    json_body,
    query_choice,
    query_float,
    query_int,
    query_text,
    validated,
)
from signoff.server.csrf import CSRF_HEADER, check_csrf, check_origin
from signoff.server.errors import ApiError, forbidden, from_signoff_error, invalid
from signoff.server.identity import Identity
from signoff.server.responses import FastJSONResponse as JSONResponse
from signoff.server.state import ServerState, state_of
from signoff.server.wire import (
    CancelBody,
    ExecutionBody,
    InquiryBody,
    SubmitBody,
    build_context,
    grant_view,
    request_view,
    tool_calls,
)

STATUSES = ("pending", "resolved", "expired", "cancelled")
KINDS = ("tool_call", "inquiry")


async def caller(request: Request, state: ServerState) -> Identity:
    """Authenticate; browser credentials on a POST must also pass the CSRF checks."""
    who = await state.auth.require(request)
    if who.browser and request.method == "POST":
        check_origin(request, state.public_url)
        assert who.session_key is not None
        check_csrf(request, state.secret, who.session_key, request.headers.get(CSRF_HEADER))
    return who


def _agent_context(
    state: ServerState, who: Identity, body: SubmitBody | InquiryBody
) -> CallContext:
    if body.context.agent is not None and body.context.agent != who.name:
        raise ApiError(
            403,
            "agent_mismatch",
            f"this token belongs to agent {who.name!r}, not {body.context.agent!r}",
            field="context.agent",
        )
    ctx = build_context(body.context, who.name, who.trusted_roles, state.policy)
    _check_principal(state, ctx.principal.id)
    return ctx


def _check_principal(state: ServerState, principal_id: str) -> None:
    """``gate.strict_principals``: a principal not in ``people:`` is a 422, nothing stored."""
    if not state.gate.settings.strict_principals:  # the gate's policy never changes
        return
    reason = unknown_principal(state.policy, principal_id)
    if reason is not None:
        raise ApiError(422, UNKNOWN_PRINCIPAL, reason, field="context.principal.id")


async def submit(request: Request) -> Response:
    state = state_of(request)
    who = await caller(request, state)
    require_agent(who, "submit tool calls")
    body = validated(SubmitBody, await json_body(request))
    ctx = _agent_context(state, who, body)
    calls = tool_calls(body)
    check_submission(calls, ctx.attrs, state.gate.limits)  # 422 naming the field; nothing stored
    sub = await state.gate.asubmit(calls, ctx, reattach=body.reattach)
    if sub.request is not None and sub.request.agent != who.name:
        raise ApiError(
            409,
            "idempotency_conflict",
            f"tool-call ids on thread {ctx.thread!r} already belong to another agent's request",
        )
    for call, verdict in zip(calls, sub.verdicts, strict=True):
        if verdict.allowed:
            state.gate.record_execution(call, ctx)  # the agent runs it now (rate limits)
    if sub.created and sub.request is not None:
        state.just_submitted.put(sub.request)  # for the agent's first long-poll
    return JSONResponse(sub.to_wire(), status_code=201 if sub.created else 200)


async def ask(request: Request) -> Response:
    state = state_of(request)
    who = await caller(request, state)
    require_agent(who, "ask questions")
    body = validated(InquiryBody, await json_body(request))
    ctx = _agent_context(state, who, body)
    check_submission([], ctx.attrs, state.gate.limits)
    req = await state.gate.aask(
        body.question,
        choices=body.choices,
        default_answer=body.default_answer,
        allow_other=body.allow_other,
        questions=body.questions,
        format=body.format,
        timeout=body.timeout,
        ctx=ctx,
        wait=False,
    )
    assert isinstance(req, ApprovalRequest)
    return JSONResponse(request_view(req, state.policy.secret_keys), status_code=201)


async def list_requests(request: Request) -> Response:
    state = state_of(request)
    who = await caller(request, state)
    status = query_choice(request, "status", STATUSES)
    kind = query_choice(request, "kind", KINDS)
    thread = query_text(request, "thread")
    limit = query_int(request, "limit", 100, 1, 500)
    offset = query_int(request, "offset", 0, 0, 10_000_000)
    page = await state.gate.alist(
        status=status, thread=thread, kind=kind, limit=limit, offset=offset
    )
    return JSONResponse(
        {
            "requests": [
                request_view(r, state.policy.secret_keys) for r in page if may_see(who, r)
            ],
            "next_offset": offset + limit if len(page) == limit else None,
        }
    )


async def get_request(request: Request) -> Response:
    state = state_of(request)
    who = await caller(request, state)
    req = await visible_request(state, who, request.path_params["id"])
    return JSONResponse(request_view(req, state.policy.secret_keys))


async def post_decisions(request: Request) -> Response:
    state = state_of(request)
    who = await caller(request, state)
    data = await json_body(request)
    if isinstance(data, dict):
        extra = sorted(set(data) - {"decisions"})
        if extra:
            raise invalid(
                f'unknown field {extra[0]!r}; the body is {{"decisions": [...]}}', extra[0]
            )
        data = data.get("decisions")
    if not isinstance(data, list):
        raise invalid("decisions must be a list of {tool_call_id, type, ...}", "decisions")
    channel = "web" if who.browser else "api"
    started = utcnow()
    try:
        req = await decide(state, who, request.path_params["id"], data, channel)
    except AlreadyDecided as exc:
        raise _already_decided(exc, await state.gate.get(exc.request_id)) from None
    view = request_view(req, state.policy.secret_keys)
    view["grants"] = await _grants_created(state, who, req, channel, started)
    return JSONResponse(view)


async def _grants_created(
    state: ServerState, who: Identity, req: ApprovalRequest, channel: str, since: datetime
) -> list[dict[str, Any]]:
    """The grants the decisions just posted created (approvals with a wider ``scope``)."""
    ids = [
        d.grant_id
        for d in req.decisions
        if d.grant_id and d.approver == who.name and d.channel == channel and d.at >= since
    ]
    now = utcnow()
    views = []
    for grant_id in dict.fromkeys(ids):
        grant = await state.gate.store.get_grant(grant_id)
        if grant is not None:
            views.append(grant_view(grant, now))
    return views


def _already_decided(exc: AlreadyDecided, req: ApprovalRequest) -> ApiError:
    """The 409, with each call's outcome: who decided what, and when."""
    error = from_signoff_error(exc)
    error.extra["resolution"] = request_view(req, None)["resolution"]  # outcomes only
    return error


async def wait(request: Request) -> Response:
    """Long-poll: answer as soon as the request is terminal (the store pushes the wake-up),
    or after ``timeout`` seconds with the current state — whichever comes first."""
    state = state_of(request)
    who = await caller(request, state)
    timeout = query_float(request, "timeout", 25.0, 0.0, state.settings.serve.long_poll_max)
    request_id = request.path_params["id"]
    # the request this server just created for this agent saves a read (just_submitted.py);
    # only to start a wait, which reads it again once registered, never as the answer itself
    kept = who.agent and timeout > 0
    req = state.just_submitted.take(request_id, who.name) if kept else None
    if req is None:
        req = await visible_request(state, who, request_id)
    if req.pending and timeout > 0:
        req = await _wait_or_stop(state, req, timeout)
    return JSONResponse(request_view(req, state.policy.secret_keys))


async def _wait_or_stop(
    state: ServerState, current: ApprovalRequest, timeout: float
) -> ApprovalRequest:
    request_id = current.id
    if state.stopping.is_set():
        return await state.gate.get(request_id)  # shutting down: answer now
    # the waiter starts from the request just read (one read less); the store reads the row
    # again once the waiter is registered, so a decision in between is not missed. It is one
    # task that shutdown (app.stop) cancels: no second task per long-poll to watch for that.
    waiter = asyncio.ensure_future(
        state.gate.await_request(request_id, timeout=timeout, current=current)
    )
    state.long_polls.add(waiter)
    state.metrics.long_polls += 1
    try:
        return await waiter
    except asyncio.CancelledError:
        this = asyncio.current_task()
        if this is not None and this.cancelling():
            raise  # this request itself is being cancelled (the waiter went with it)
    finally:
        state.metrics.long_polls -= 1
        state.long_polls.discard(waiter)
    return await state.gate.get(request_id)  # shutting down: answer now, the agent reconnects


async def cancel(request: Request) -> Response:
    state = state_of(request)
    who = await caller(request, state)
    body = validated(CancelBody, await json_body(request, empty={}))
    try:
        req = await visible_request(state, who, request.path_params["id"])
    except RequestQuarantined as exc:
        if not who.admin:  # an unreadable row shows nobody who made it: admins close it
            raise
        closed = await state.gate.store.cancel_quarantined(
            exc.request_id or request.path_params["id"], actor=who.name, reason=body.reason
        )
        return JSONResponse({**closed.to_json(), "quarantined": True})
    if not may_cancel(who, req):
        raise forbidden("only the agent that made the request, or an admin, may cancel it")
    req = await state.gate.acancel(req.id, actor=who.name, reason=body.reason)
    return JSONResponse(request_view(req, state.policy.secret_keys))


async def execution(request: Request) -> Response:
    """The exactly-once ledger for a call a remote agent runs: executing → executed|failed."""
    state = state_of(request)
    who = await caller(request, state)
    require_agent(who, "report executions")
    body = validated(ExecutionBody, await json_body(request))
    req = await visible_request(state, who, request.path_params["id"])
    call_id = request.path_params["call_id"]
    if call_id not in {c.tool_call_id for c in req.calls}:
        raise ApiError(404, "not_found", f"no call {call_id!r} in request {req.id}")
    gate = state.gate
    if body.state == "executing":
        await gate.aclaim(req.id, call_id, actor=who.name)
    else:
        await gate.afinish(
            req.id, call_id, error=body.error if body.state == "failed" else None, actor=who.name
        )
        if body.state == "executed":
            action = req.call(call_id).action
            gate.record_execution(
                ToolCall(action.name, action.args, id=call_id), request_context(req, state.policy)
            )
    return JSONResponse(request_view(await gate.get(req.id), state.policy.secret_keys))


async def reconcile(request: Request) -> Response:
    """An approver records how an interrupted execution ended: ``{"outcome": "executed" |
    "failed", "message": "..."}`` (only after ``gate.execution_timeout``)."""
    state = state_of(request)
    who = await caller(request, state)
    require_approver(who, "reconcile executions")
    data = await json_body(request)
    if not isinstance(data, dict):
        raise invalid('the body is {"outcome": "executed" | "failed", "message": "..."}', "body")
    outcome, message = data.get("outcome"), data.get("message")
    if outcome not in ("executed", "failed"):
        raise invalid("outcome is executed or failed", "outcome")
    if message is not None and not isinstance(message, str):
        raise invalid("message is a string", "message")
    req = await state.gate.areconcile(
        request.path_params["id"],
        request.path_params["call_id"],
        outcome=outcome,
        actor=who.name,
        message=message,
    )
    return JSONResponse(request_view(req, state.policy.secret_keys))


routes = [
    Route("/v1/requests", submit, methods=["POST"]),
    Route("/v1/requests", list_requests, methods=["GET"]),
    Route("/v1/inquiries", ask, methods=["POST"]),
    Route("/v1/requests/{id}", get_request, methods=["GET"]),
    Route("/v1/requests/{id}/decisions", post_decisions, methods=["POST"]),
    Route("/v1/requests/{id}/wait", wait, methods=["GET"]),
    Route("/v1/requests/{id}/cancel", cancel, methods=["POST"]),
    Route("/v1/requests/{id}/calls/{call_id}/execution", execution, methods=["POST"]),
    Route("/v1/requests/{id}/calls/{call_id}/reconcile", reconcile, methods=["POST"]),
]
