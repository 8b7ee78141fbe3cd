"""CSRF protection for browser credentials (session cookie, SSO proxy header).

Three layers, each enough against classic CSRF on its own:

* ``SameSite=Lax`` session cookies — other sites' POSTs arrive without them;
* an ``Origin`` / ``Sec-Fetch-Site`` check on every POST — a foreign origin is refused;
* a synchronizer token: HMAC(server secret, session) in every form (``csrf``) and in the
  ``X-CSRF-Token`` header of the inbox's own fetches.

Bearer-token API calls need none of this: a browser never attaches a bearer token by itself.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import urlsplit

from starlette.requests import Request

from signoff.server.errors import ApiError

CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf"


def csrf_token(secret: bytes, session_key: str) -> str:
    return hmac.new(secret, f"csrf:{session_key}".encode(), hashlib.sha256).hexdigest()


def valid_csrf(secret: bytes, session_key: str, presented: str | None) -> bool:
    return bool(presented) and same_secret(csrf_token(secret, session_key), presented or "")


def same_secret(expected: str, presented: str) -> bool:
    """Constant-time comparison that takes any text (``compare_digest`` refuses non-ASCII
    strings with a TypeError — a 500 for a forged header or form field)."""
    return hmac.compare_digest(expected.encode(), presented.encode("utf-8", "surrogatepass"))


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def same_origin(request: Request, public_url: str | None) -> bool:
    """False for a POST a foreign page made (by ``Origin`` or ``Sec-Fetch-Site``).

    A missing ``Origin`` is accepted (non-browser clients); the secret in the body or the
    CSRF token still has to be right. ``Origin: null`` needs ``Sec-Fetch-Site`` to agree.
    """
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True
    if origin == "null":
        # Pages served with Referrer-Policy: no-referrer (the link pages) post "Origin: null";
        # then the browser's Sec-Fetch-Site must vouch that the form was ours.
        return fetch_site in ("same-origin", "none")
    ours = {origin_of(str(request.base_url))}
    if public_url:
        ours.add(origin_of(public_url))
    return origin.lower() in ours


def check_origin(request: Request, public_url: str | None) -> None:
    if not same_origin(request, public_url):
        raise ApiError(
            403,
            "forbidden_origin",
            "this form was posted from another site; open signoff's own page and try again",
        )


def check_csrf(request: Request, secret: bytes, session_key: str, presented: str | None) -> None:
    if not valid_csrf(secret, session_key, presented):
        raise ApiError(
            403,
            "csrf_failed",
            "the page's security token is missing or stale; reload the page and try again",
        )
