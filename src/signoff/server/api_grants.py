"""``/v1/grants``: standing approvals and refusals, made and revoked by approvers.

The creator is always the authenticated approver (never a name from the body); the gate
checks what that person may grant (``thread``/``agent``/``principal`` scope: someone who
could approve such a call alone under the rule; ``global`` and every ``deny`` grant: one of
``grants.admin_roles``) and who may revoke (the creator, or a grants admin). Refusals are 403,
a bad field a 422 naming it.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from signoff.model import DecisionError, NotAuthorized, PolicyError, utcnow
from signoff.policy.durations import parse_duration
from signoff.policy.grant_rule import resolve_rule
from signoff.server.access import require_approver
from signoff.server.api_requests import caller
from signoff.server.bodies import json_body, validated
from signoff.server.csrf import CSRF_HEADER, check_csrf, check_origin
from signoff.server.errors import invalid
from signoff.server.state import state_of
from signoff.server.wire import GrantBody, RevokeGrantBody, grant_view

#: The gate names a decision's lifetime ``scope.for``; in this body it is ``for``.
_FIELDS = {"scope.for": "for", "scope.when": "when"}


def query_flag(request: Request, name: str) -> bool:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return False
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    raise invalid(f"{name} must be true or false", name)


async def list_grants(request: Request) -> Response:
    state = state_of(request)
    who = await caller(request, state)
    require_approver(who, "read grants")
    grants = await state.gate.alist_grants(active=query_flag(request, "active"))
    now = utcnow()
    return JSONResponse({"grants": [grant_view(g, now) for g in grants]})


async def create_grant(request: Request) -> Response:
    state = state_of(request)
    who = await caller(request, state)
    require_approver(who, "create grants")
    body = validated(GrantBody, await json_body(request))
    if body.for_ is not None:
        try:
            parse_duration(body.for_)
        except PolicyError as exc:
            raise invalid(exc.message, "for") from None
    rule = body.rule or resolve_rule(
        state.policy, body.tool, body.when, principal=body.principal, agent=body.agent,
        thread=body.thread,
    )  # fmt: skip
    try:
        grant = await state.gate.agrant(
            tool=body.tool,
            rule=rule,
            effect=body.effect,
            scope=body.scope,
            created_by=who.name,
            thread=body.thread,
            agent=body.agent,
            principal=body.principal,
            when=body.when,
            ttl=body.for_,
            reason=body.reason,
        )
    except DecisionError as exc:
        if isinstance(exc, NotAuthorized) or exc.field not in _FIELDS:
            raise
        raise invalid(exc.message, _FIELDS[exc.field]) from None
    return JSONResponse(grant_view(grant, utcnow()), status_code=201)


async def revoke_grant(request: Request) -> Response:
    state = state_of(request)
    who = await caller(request, state)
    if who.browser:  # a DELETE with browser credentials needs the same checks as a POST
        check_origin(request, state.public_url)
        assert who.session_key is not None
        check_csrf(request, state.secret, who.session_key, request.headers.get(CSRF_HEADER))
    require_approver(who, "revoke grants")
    body = validated(RevokeGrantBody, await json_body(request, empty={}))
    grant = await state.gate.arevoke_grant(
        request.path_params["id"], by=who.name, reason=body.reason
    )
    return JSONResponse(grant_view(grant, utcnow()))


routes = [
    Route("/v1/grants", list_grants, methods=["GET"]),
    Route("/v1/grants", create_grant, methods=["POST"]),
    Route("/v1/grants/{id}", revoke_grant, methods=["DELETE"]),
]
