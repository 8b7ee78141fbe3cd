"""Server-rendered HTML: the Jinja2 environment and the headers every page carries.

No inline script or style anywhere, so the Content-Security-Policy can forbid them: an
argument value that smuggles markup is escaped by Jinja2 and could not run even if not.
Every ``{{ value }}`` is also made inert before it is escaped (:func:`shown`), so a bidi
override cannot reverse what an approver reads.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import jinja2
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.templating import Jinja2Templates

from signoff.model.text import inert

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
#: One-click link pages: the token is in the URL, so no referrer, no cache, no indexing.
LINK_HEADERS = {
    **SECURITY_HEADERS,
    "Referrer-Policy": "no-referrer",
    "X-Robots-Tag": "noindex, nofollow",
}


def make_templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("signoff.server", "templates"),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=shown,
    )
    env.filters["iso"] = _iso
    env.filters["when"] = _when
    return Jinja2Templates(env=env)


def shown(value: Any) -> Any:
    """What a template prints of ``value``: text with control, bidi and invisible characters
    made visible (line breaks kept: HTML folds them, and ``<pre>`` needs them); markup we
    built ourselves (``Markup``) and non-text values unchanged. Jinja2 escapes after this."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return inert(value, keep_newlines=True)
    return value


def _iso(value: datetime | None) -> str:
    return value.astimezone(UTC).isoformat(timespec="seconds") if value else ""


def _when(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if value else ""


def render(
    templates: Jinja2Templates,
    request: Request,
    name: str,
    context: dict[str, Any],
    *,
    status: int = 200,
    link_page: bool = False,
) -> Response:
    response: Response = templates.TemplateResponse(
        request,
        name,
        context,
        status_code=status,
        headers=LINK_HEADERS if link_page else SECURITY_HEADERS,
    )
    return response


def message_page(
    templates: Jinja2Templates,
    request: Request,
    title: str,
    message: str,
    *,
    status: int,
    link_page: bool = False,
    ui_title: str = "signoff",
) -> Response:
    return render(
        templates,
        request,
        "message.html",
        {"title": title, "message": message, "who": None, "ui_title": ui_title, "csrf": ""},
        status=status,
        link_page=link_page,
    )


def html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status, headers=SECURITY_HEADERS)
