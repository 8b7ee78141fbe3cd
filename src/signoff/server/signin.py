"""Signing in to the inbox with an approver token, and signing out.

The sign-in form has its own CSRF defence (there is no session yet): a random cookie,
``SameSite=Strict``, whose HMAC the form must echo — plus the Origin check every POST gets.
One-click sign-in links live in :mod:`.links`.
"""

from __future__ import annotations

import hashlib
import hmac

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from signoff.server.csrf import CSRF_FIELD, same_secret
from signoff.server.errors import ApiError
from signoff.server.inbox import context, read_form, signed_in
from signoff.server.pages import message_page, render
from signoff.server.records import new_secret
from signoff.server.sessions import end_session, over_tls, start_session
from signoff.server.state import ServerState, state_of

PRELOGIN_COOKIE = "signoff_prelogin"


def _prelogin_token(state: ServerState, nonce: str) -> str:
    return hmac.new(state.secret, f"login:{nonce}".encode(), hashlib.sha256).hexdigest()


async def login_page(request: Request, error: str | None = None, status: int = 200) -> Response:
    state = state_of(request)
    nonce = request.cookies.get(PRELOGIN_COOKIE) or new_secret()
    response = render(
        state.templates,
        request,
        "login.html",
        context(state, None, error=error, login_csrf=_prelogin_token(state, nonce)),
        status=status,
    )
    response.set_cookie(
        PRELOGIN_COOKIE,
        nonce,
        max_age=3600,
        path="/login",
        httponly=True,
        samesite="strict",
        secure=over_tls(request, state),
    )
    return response


async def login(request: Request) -> Response:
    state = state_of(request)
    try:
        form = await read_form(request, state, None)
        nonce = request.cookies.get(PRELOGIN_COOKIE, "")
        presented = form.get(CSRF_FIELD)
        if (
            not nonce
            or not isinstance(presented, str)
            or not same_secret(_prelogin_token(state, nonce), presented)
        ):
            raise ApiError(403, "csrf_failed", "the sign-in form expired; try again")
        token = form.get("token")
        who, token_id = await state.auth.token_identity(token if isinstance(token, str) else "")
    except ApiError as exc:
        return await login_page(request, exc.message, exc.status)
    response = RedirectResponse("/inbox", status_code=303)
    await start_session(request, response, state, who.name, token_id=token_id)
    return response


async def logout(request: Request) -> Response:
    state = state_of(request)
    who = await signed_in(request, state)
    if isinstance(who, Response):
        return who
    try:
        await read_form(request, state, who)
    except ApiError as exc:
        return message_page(state.templates, request, "Not allowed", exc.message, status=exc.status)
    response = RedirectResponse("/login", status_code=303)
    await end_session(request, response, state)
    return response


routes = [
    Route("/login", login_page, methods=["GET"]),
    Route("/login", login, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
]
