"""One-click links for notifications: ``/a/{request_id}?t=…`` and ``/login/link?t=…``.

* A link is 256 random bits, stored hashed, bound to one approver and (except sign-in
  links) one request — and to one decision for ``approve``/``reject`` links. It expires at
  the request's deadline and works once; deciding burns the approver's other links to it.
* **GET and HEAD never decide.** Mail scanners and chat unfurlers fetch links before the
  person does, some with a headless browser that runs scripts; they see a confirmation page.
  The decision is a POST from that page (the token in the body), refused from another origin.
* Pages carry ``Referrer-Policy: no-referrer`` and ``Cache-Control: no-store``, so the token
  leaks neither to other sites nor into caches.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from signoff.model import AlreadyDecided, ApprovalRequest, NotFound, SignoffError
from signoff.server.access import decidable_calls
from signoff.server.actions import decide
from signoff.server.csrf import same_origin
from signoff.server.errors import from_signoff_error
from signoff.server.pages import message_page, render
from signoff.server.presenter import present
from signoff.server.records import LinkPurpose, LinkRecord, ServerDB, digest, new_secret
from signoff.server.sessions import start_session
from signoff.server.state import ServerState, state_of

GONE = "This link has expired or was already used. Open the inbox to see the request."


class LinkIssuer:
    """Creates one-click links; channels (email, Slack DMs…) put them in notifications."""

    def __init__(self, state: ServerState) -> None:
        self.state = state

    async def decision_link(
        self, request_id: str, approver: str, decision: LinkPurpose = "review"
    ) -> str:
        """A link for ``approver`` to decide ``request_id``; ``approve``/``reject`` links do
        only that, a ``review`` link offers both and a way into the inbox."""
        if decision == "login":
            raise ValueError("use login_link() for sign-in links")
        req = await self.state.gate.get(request_id)
        raw = await self._store(decision, approver, req.expires_at.timestamp(), request_id)
        return link_url(self.state.base_url(), decision, raw, request_id)

    async def login_link(self, approver: str, ttl: float | None = None) -> str:
        seconds = ttl if ttl is not None else self.state.settings.auth.login_link_ttl
        raw = await self._store("login", approver, time.time() + seconds, None)
        return link_url(self.state.base_url(), "login", raw, None)

    async def _store(
        self, purpose: LinkPurpose, approver: str, expires_at: float, request_id: str | None
    ) -> str:
        return await store_link(self.state.db, purpose, approver, expires_at, request_id)


async def store_link(
    db: ServerDB, purpose: LinkPurpose, approver: str, expires_at: float, request_id: str | None
) -> str:
    """Keep a new link's hash; returns the raw token (it exists only in the URL sent)."""
    raw = new_secret()
    await db.add_link(
        LinkRecord(digest(raw), purpose, approver, time.time(), expires_at, request_id)
    )
    return raw


def link_url(base_url: str, purpose: LinkPurpose, raw: str, request_id: str | None) -> str:
    if purpose == "login" or request_id is None:
        return f"{base_url.rstrip('/')}/login/link?t={raw}"
    return f"{base_url.rstrip('/')}/a/{quote(request_id)}?t={raw}"


async def _live_link(state: ServerState, token: str, request_id: str | None) -> LinkRecord | None:
    """The link if it may still be used for this request (looked up, never consumed)."""
    if not token:
        return None
    link = await state.db.link_by_hash(digest(token))
    if link is None or link.used_at is not None or link.expires_at <= time.time():
        return None
    if link.request_id != request_id or (request_id is None) != (link.purpose == "login"):
        return None
    return link


def _gone(state: ServerState, request: Request) -> Response:
    return message_page(
        state.templates, request, "Link no longer valid", GONE, status=410, link_page=True
    )


def _confirm(
    state: ServerState,
    request: Request,
    link: LinkRecord,
    req: ApprovalRequest,
    token: str,
    *,
    error: str | None = None,
    status: int = 200,
) -> Response:
    who = state.auth.person(link.approver)
    page = present(req, who, state.policy.secret_keys)
    context: dict[str, Any] = {
        "who": None,
        "ui_title": state.settings.ui.title,
        "csrf": "",
        "p": page,
        "link": link,
        "token": token,
        "error": error,
        "approver": link.approver,
        "may_decide": bool(decidable_calls(who, req)),
    }
    return render(state.templates, request, "link.html", context, status=status, link_page=True)


async def link_page(request: Request) -> Response:
    """GET/HEAD: show what the link would do. Nothing is consumed or decided."""
    state = state_of(request)
    request_id = request.path_params["id"]
    token = request.query_params.get("t", "")
    link = await _live_link(state, token, request_id)
    if link is None:
        return _gone(state, request)
    try:
        req = await state.gate.get(request_id)
    except NotFound:
        return _gone(state, request)
    return _confirm(state, request, link, req, token)


async def link_decide(request: Request) -> Response:
    """POST from the confirmation page: consume the link, then decide as its approver."""
    state = state_of(request)
    request_id = request.path_params["id"]
    if not same_origin(request, state.public_url):
        return message_page(
            state.templates,
            request,
            "Not allowed",
            "This form was posted from another site.",
            status=403,
            link_page=True,
        )
    form = await request.form()
    token = str(form.get("t") or "")
    action = str(form.get("decision") or "")
    message = str(form.get("message") or "").strip() or None
    link = await _live_link(state, token, request_id)
    allowed = (
        ("approve", "reject", "signin")
        if link and link.purpose == "review"
        else ((link.purpose,) if link else ())
    )
    if link is None or action not in allowed:
        return _gone(state, request)
    used = await state.db.consume_link(link.token_hash, time.time())
    if used is None:
        return _gone(state, request)  # a concurrent click took it first
    if action == "signin":
        response = RedirectResponse(f"/requests/{quote(request_id)}", status_code=303)
        await start_session(request, response, state, link.approver)
        return response
    return await _decide_by_link(state, request, used, token, action, message)


async def _decide_by_link(
    state: ServerState,
    request: Request,
    link: LinkRecord,
    token: str,
    action: str,
    message: str | None,
) -> Response:
    assert link.request_id is not None
    who = state.auth.person(link.approver)
    try:
        req = await state.gate.get(link.request_id)
        targets = sorted(decidable_calls(who, req)) or req.pending_call_ids
        if not targets:
            targets = [c.tool_call_id for c in req.calls]
        decisions = [{"tool_call_id": c, "type": action, "message": message} for c in targets]
        req = await decide(state, who, link.request_id, decisions, "link")
    except AlreadyDecided as exc:
        return message_page(
            state.templates, request, "Already decided", str(exc), status=409, link_page=True
        )
    except SignoffError as exc:
        await state.db.release_link(link.token_hash)  # refused: nothing stored, link still good
        api = from_signoff_error(exc)
        fresh = await state.gate.get(link.request_id)
        return _confirm(state, request, link, fresh, token, error=api.message, status=api.status)
    await state.db.burn_links(link.request_id, link.approver, time.time())
    verb = "Approved" if action == "approve" else "Rejected"
    return message_page(
        state.templates,
        request,
        f"{verb} — thank you",
        f"{verb} as {link.approver}. The agent has been told.",
        status=200,
        link_page=True,
    )


async def login_link_page(request: Request) -> Response:
    state = state_of(request)
    token = request.query_params.get("t", "")
    link = await _live_link(state, token, None)
    if link is None:
        return _gone(state, request)
    context = {
        "who": None,
        "ui_title": state.settings.ui.title,
        "csrf": "",
        "approver": link.approver,
        "token": token,
    }
    return render(state.templates, request, "login_link.html", context, link_page=True)


async def login_link_post(request: Request) -> Response:
    state = state_of(request)
    if not same_origin(request, state.public_url):
        return message_page(
            state.templates,
            request,
            "Not allowed",
            "This form was posted from another site.",
            status=403,
            link_page=True,
        )
    form = await request.form()
    token = str(form.get("t") or "")
    link = await _live_link(state, token, None)
    used = await state.db.consume_link(link.token_hash, time.time()) if link else None
    if used is None:
        return _gone(state, request)
    response = RedirectResponse("/inbox", status_code=303)
    await start_session(request, response, state, used.approver)
    return response


routes = [
    Route("/a/{id}", link_page, methods=["GET", "HEAD"]),
    Route("/a/{id}", link_decide, methods=["POST"]),
    Route("/login/link", login_link_page, methods=["GET", "HEAD"]),
    Route("/login/link", login_link_post, methods=["POST"]),
]
