"""The inbox's Grants page: the active standing approvals and refusals, each with the
sentence saying what it covers, and a Revoke button for its creator and grants admins (a
form POST with the CSRF token, like every other form)."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from signoff.model import SignoffError, utcnow
from signoff.model.grants import Grant
from signoff.server.errors import ApiError, from_signoff_error
from signoff.server.identity import Identity
from signoff.server.inbox import context, read_form, signed_in
from signoff.server.pages import message_page, render
from signoff.server.state import ServerState, state_of


@dataclass(frozen=True, slots=True)
class GrantRow:
    grant: Grant
    description: str
    revocable: bool


def may_revoke(state: ServerState, who: Identity, grant: Grant) -> bool:
    """Its creator, or a holder of ``grants.admin_roles`` (the gate checks again)."""
    admins = set(state.gate.grant_settings.admin_roles)
    if state.policy.roles_of(who.name) & admins:
        return True
    return state.policy.same_person(who.name, grant.created_by)


async def grants_page(request: Request) -> Response:
    state = state_of(request)
    who = await signed_in(request, state)
    if isinstance(who, Response):
        return who
    return await _page(request, state, who)


async def _page(
    request: Request, state: ServerState, who: Identity, *, error: str | None = None,
    status: int = 200,
) -> Response:  # fmt: skip
    grants = await state.gate.alist_grants(active=True)
    rows = [GrantRow(g, g.describe(), may_revoke(state, who, g)) for g in grants]
    return render(
        state.templates,
        request,
        "grants.html",
        context(state, who, rows=rows, error=error, now=utcnow(), page="grants"),
        status=status,
    )


async def revoke_form(request: Request) -> Response:
    state = state_of(request)
    who = await signed_in(request, state)
    if isinstance(who, Response):
        return who
    try:
        form = await read_form(request, state, who)
    except ApiError as exc:
        return message_page(state.templates, request, "Not allowed", exc.message, status=exc.status)
    reason = form.get("reason")
    text = reason.strip() if isinstance(reason, str) and reason.strip() else None
    try:
        await state.gate.arevoke_grant(request.path_params["id"], by=who.name, reason=text)
    except SignoffError as exc:
        api = from_signoff_error(exc)
        return await _page(request, state, who, error=api.message, status=api.status)
    return RedirectResponse("/grants", status_code=303)


routes = [
    Route("/grants", grants_page, methods=["GET"]),
    Route("/grants/{id}/revoke", revoke_form, methods=["POST"]),
]
