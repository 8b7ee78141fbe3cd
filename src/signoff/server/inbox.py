"""The web inbox: the live pending list, the request page, history and audit.

Plain server-rendered pages with forms: deciding works without JavaScript. A small script
(``static/inbox.js``) adds live updates over ``/v1/events``, countdowns and keyboard
shortcuts. Every POST checks the Origin and a CSRF token bound to the session.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from signoff.gate.granting import grant_from_decision
from signoff.model import ApprovalRequest, NotFound, RequestQuarantined, SignoffError, chains
from signoff.model.grants import GrantRequest
from signoff.server.access import awaits_approval, decidable_calls, may_see
from signoff.server.actions import decide
from signoff.server.api_audit import Visibility, audit_query
from signoff.server.bodies import query_choice, query_text
from signoff.server.csrf import CSRF_FIELD, check_csrf, check_origin, csrf_token
from signoff.server.errors import ApiError, from_signoff_error
from signoff.server.identity import SESSION_COOKIE, Identity
from signoff.server.inquiry_form import answers_from_form
from signoff.server.pages import message_page, render
from signoff.server.presenter import FieldError, parse_edit, present, redact
from signoff.server.state import ServerState, state_of

HISTORY_STATUSES = ("resolved", "expired", "cancelled")
THREAD_GRANT = GrantRequest(kind="thread")


async def signed_in(request: Request, state: ServerState) -> Identity | Response:
    """The person at the browser, or the response to send instead (sign-in page, 403)."""
    try:
        who = await state.auth.identify(request)
    except ApiError as exc:
        if exc.status != 401:
            return message_page(
                state.templates, request, "Not allowed", exc.message, status=exc.status
            )
        who = None
    if who is None:
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response
    if who.agent:
        return message_page(
            state.templates, request, "Not allowed", "agent tokens have no inbox", status=403
        )
    return who


def context(state: ServerState, who: Identity | None, **extra: Any) -> dict[str, Any]:
    csrf = csrf_token(state.secret, who.session_key) if who and who.session_key else ""
    return {"who": who, "ui_title": state.settings.ui.title, "csrf": csrf, **extra}


async def read_form(request: Request, state: ServerState, who: Identity | None) -> FormData:
    """Read a form POST after the Origin and CSRF checks."""
    check_origin(request, state.public_url)
    form = await request.form()
    if who is not None and who.browser:
        assert who.session_key is not None
        value = form.get(CSRF_FIELD)
        check_csrf(
            request, state.secret, who.session_key, value if isinstance(value, str) else None
        )
    return form


# ---------------------------------------------------------------------- pages
async def home(request: Request) -> Response:
    return RedirectResponse("/inbox", status_code=303)


async def inbox(request: Request) -> Response:
    state = state_of(request)
    who = await signed_in(request, state)
    if isinstance(who, Response):
        return who
    pending = await state.gate.alist(status="pending", limit=500)
    rows = [_row(r, who) for r in pending if may_see(who, r)]
    name = "_inbox_rows.html" if request.query_params.get("partial") else "inbox.html"
    return render(state.templates, request, name, context(state, who, rows=rows, page="inbox"))


def _row(req: ApprovalRequest, who: Identity) -> dict[str, Any]:
    risks = [a.risk for a in req.action_requests if a.risk]
    order = ("low", "medium", "high", "critical")
    return {
        "req": req,
        "tools": ", ".join(dict.fromkeys(a.name for a in req.action_requests)),
        "summary": "; ".join(a.description or a.name for a in req.action_requests),
        "risk": max(risks, key=order.index) if risks else None,
        "needs_me": awaits_approval(who, req),
        "approvals": sum(len(c.approvals) for c in req.calls),
        "quorum": sum(c.quorum for c in req.calls),
        "progress": "; ".join(
            p
            for cfg, c in zip(req.review_configs, req.calls, strict=True)
            if c.resolution is None and (p := chains.progress(cfg, c))
        ),
    }


async def request_page(request: Request) -> Response:
    state = state_of(request)
    who = await signed_in(request, state)
    if isinstance(who, Response):
        return who
    try:
        req = await state.gate.get(request.path_params["id"])
    except NotFound:
        return message_page(state.templates, request, "Not found", "No such request.", status=404)
    except RequestQuarantined as exc:  # an unreadable row: say so instead of a 500
        return message_page(state.templates, request, "Quarantined", str(exc), status=409)
    if not may_see(who, req):
        return message_page(
            state.templates, request, "Not allowed", "You may not see this request.", status=403
        )
    return _request_response(request, state, who, req)


def _request_response(
    request: Request,
    state: ServerState,
    who: Identity,
    req: ApprovalRequest,
    *,
    error: tuple[str | None, str | None, str] | None = None,
    posted: dict[str, str] | None = None,
    status: int = 200,
) -> Response:
    texts = grant_previews(state, who, req)
    page = present(req, who, state.policy.secret_keys, error, posted, texts)
    name = "_request_body.html" if request.query_params.get("partial") else "request.html"
    return render(
        state.templates, request, name, context(state, who, p=page, page="request"), status=status
    )


def grant_previews(state: ServerState, who: Identity, req: ApprovalRequest) -> dict[str, str]:
    """For each call ``who`` may approve now: the sentence of the grant that approving it
    "for the thread" would create — built by the gate's own code, so the checkbox states
    exactly what is granted (none where the policy forbids it, or for a quorum)."""
    texts = {}
    for call_id in decidable_calls(who, req):
        try:
            grant = grant_from_decision(
                state.gate, req, call_id, THREAD_GRANT, who.name, None, "decisions[0]"
            )
        except SignoffError:
            continue
        texts[call_id] = grant.describe()
    return texts


async def decide_form(request: Request) -> Response:
    state = state_of(request)
    who = await signed_in(request, state)
    if isinstance(who, Response):
        return who
    request_id = request.path_params["id"]
    try:
        form = await read_form(request, state, who)
        req = await state.gate.get(request_id)
    except ApiError as exc:
        return message_page(state.templates, request, "Not allowed", exc.message, status=exc.status)
    except NotFound:
        return message_page(state.templates, request, "Not found", "No such request.", status=404)
    if not may_see(who, req):
        return message_page(
            state.templates, request, "Not allowed", "You may not see this request.", status=403
        )
    posted = {k: v for k, v in form.items() if isinstance(v, str)}
    call_id = posted.get("tool_call_id", "")
    try:
        decision = _decision_from_form(state, req, posted)
        if decision["type"] == "respond" and req.inquiry is not None and req.inquiry.is_form:
            decision["answers"] = answers_from_form(req.inquiry, form)
        await decide(state, who, request_id, [decision], "web")
    except FieldError as exc:
        field = f"decisions[0].edited_action.args.{exc.name}"
        return _request_response(
            request, state, who, req, error=(call_id, field, str(exc)), posted=posted, status=422
        )
    except (SignoffError, ApiError) as exc:
        api = exc if isinstance(exc, ApiError) else from_signoff_error(exc)
        fresh = await state.gate.get(request_id)
        return _request_response(
            request,
            state,
            who,
            fresh,
            error=(call_id or None, api.extra.get("field"), api.message),
            posted=posted,
            status=api.status,
        )
    return RedirectResponse(f"/requests/{request_id}", status_code=303)


def _decision_from_form(
    state: ServerState, req: ApprovalRequest, form: dict[str, str]
) -> dict[str, Any]:
    call_id = form.get("tool_call_id", "")
    kind = form.get("type", "")
    decision: dict[str, Any] = {"tool_call_id": call_id, "type": kind}
    message = (form.get("message") or "").strip()
    if kind == "respond" and not message:
        message = (form.get("choice") or "").strip()
    if message:
        decision["message"] = message
    if form.get("scope") == "thread":
        decision["scope"] = "thread"
    if kind == "edit":
        try:
            action, cfg = req.call(call_id).action, req.config(call_id)
        except KeyError:
            return decision  # the gate names the unknown call id
        # An edit starts from what would run now (a quorum's earlier edit included).
        args = parse_edit(action.args, cfg, form, state.policy.secret_keys)
        decision["edited_action"] = {"name": action.name, "args": args}
    return decision


async def history(request: Request) -> Response:
    state = state_of(request)
    who = await signed_in(request, state)
    if isinstance(who, Response):
        return who
    try:
        status = query_choice(request, "status", HISTORY_STATUSES)
        thread = query_text(request, "thread")
        agent = query_text(request, "agent")
    except ApiError as exc:
        return message_page(state.templates, request, "Bad filter", exc.message, status=422)
    found: list[ApprovalRequest] = []
    for wanted in [status] if status else list(HISTORY_STATUSES):
        found += await state.gate.alist(status=wanted, thread=thread, limit=200)
    found = [r for r in found if may_see(who, r) and (agent is None or r.agent == agent)]
    found.sort(key=lambda r: r.resolved_at or r.created_at, reverse=True)
    filters = {"status": status or "", "thread": thread or "", "agent": agent or ""}
    return render(
        state.templates,
        request,
        "history.html",
        context(state, who, requests=found[:200], filters=filters, page="history"),
    )


async def audit_page(request: Request) -> Response:
    state = state_of(request)
    who = await signed_in(request, state)
    if isinstance(who, Response):
        return who
    try:
        query = audit_query(request, limit=200)
    except ApiError as exc:
        return message_page(state.templates, request, "Bad filter", exc.message, status=422)
    await state.gate.store.flush_audit()
    rows = await state.gate.store.read_audit(query)
    visibility = Visibility(state, who)
    secret_key = state.policy.secret_keys
    shown = [
        {"r": r, "data": redact(r.data, secret_key)} for r in rows if await visibility.allows(r)
    ]
    keys = ("request_id", "thread", "tool", "event", "actor")
    filters = {k: request.query_params.get(k, "") for k in keys}
    chosen = {k: v for k, v in filters.items() if v}
    more = None
    if len(rows) == query.limit:
        more = "/audit?" + urlencode({**chosen, "after_seq": rows[-1].seq})
    return render(
        state.templates,
        request,
        "audit.html",
        context(
            state,
            who,
            rows=shown,
            filters=filters,
            export="/v1/audit?" + urlencode({**chosen, "format": "jsonl"}),
            more=more,
            page="audit",
        ),
    )


routes = [
    Route("/", home, methods=["GET"]),
    Route("/inbox", inbox, methods=["GET"]),
    Route("/requests/{id}", request_page, methods=["GET"]),
    Route("/requests/{id}/decide", decide_form, methods=["POST"]),
    Route("/history", history, methods=["GET"]),
    Route("/audit", audit_page, methods=["GET"]),
]
