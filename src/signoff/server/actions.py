"""The few things every entry point (API, inbox, one-click link) does the same way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from signoff.model import ApprovalRequest, Decision, utcnow
from signoff.server.access import may_see, require_approver
from signoff.server.errors import forbidden
from signoff.server.identity import Identity
from signoff.server.state import ServerState


async def visible_request(state: ServerState, who: Identity, request_id: str) -> ApprovalRequest:
    """The request if ``who`` may see it: 404 when unknown, 403 when not theirs."""
    req = await state.gate.get(request_id)
    if not may_see(who, req):
        raise forbidden(f"you ({who.name}) may not see request {request_id}")
    return req


async def decide(
    state: ServerState,
    who: Identity,
    request_id: str,
    decisions: Sequence[Decision | Mapping[str, Any]],
    channel: str,
) -> ApprovalRequest:
    """Record decisions as the authenticated approver (never a name from the body)."""
    require_approver(who, "decide")
    started = utcnow()
    req = await state.gate.adecide(request_id, decisions, approver=who.name, channel=channel)
    fresh = [
        (d.type, d.channel)
        for d in req.decisions
        if d.approver == who.name and d.channel == channel and d.at >= started
    ]
    state.metrics.decided(fresh)
    if fresh and req.terminal and req.resolved_at is not None and req.resolved_at >= started:
        state.metrics.resolved(req)
    return req
