"""Browser sessions: a random cookie (stored hashed), HttpOnly, SameSite=Lax, and Secure
whenever the browser reached us over TLS (directly, or via a trusted proxy)."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response

from signoff.server.identity import SESSION_COOKIE
from signoff.server.records import SessionRecord, digest, new_secret
from signoff.server.state import ServerState


def over_tls(request: Request, state: ServerState) -> bool:
    if request.url.scheme == "https":
        return True
    if state.public_url and state.public_url.startswith("https://"):
        return True
    proxy = state.settings.auth.trusted_proxy
    peer = request.client.host if request.client else None
    forwarded = request.headers.get("x-forwarded-proto", "").lower()
    return proxy is not None and proxy.trusts(peer) and forwarded == "https"


async def start_session(
    request: Request,
    response: Response,
    state: ServerState,
    subject: str,
    *,
    token_id: str | None = None,
) -> None:
    raw = new_secret()
    now = time.time()
    ttl = state.settings.auth.session_ttl
    await state.db.add_session(SessionRecord(digest(raw), subject, now, now + ttl, token_id))
    response.set_cookie(
        SESSION_COOKIE,
        raw,
        max_age=int(ttl),
        path="/",
        httponly=True,
        samesite="lax",
        secure=over_tls(request, state),
    )


async def end_session(request: Request, response: Response, state: ServerState) -> None:
    raw = request.cookies.get(SESSION_COOKIE)
    if raw:
        await state.db.delete_session(digest(raw))
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="lax")
