"""No approval lost: leases on waited-on requests, and re-attaching after a restart.

The process waiting on a request holds a lease on it (``waiter``, ``lease_until`` on the
request) of ``gate.lease`` (default 60 s), renewed every third of that while it waits. When
an agent submits a step whose calls — same agent, principal, thread, tools and canonical
arguments — match an open request (pending, or approved and not yet run) whose lease has
lapsed, it takes that request over instead of asking the human again (audited
``reattached``). A live waiter renews its lease, so two live runs never share one approval.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from collections import Counter
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from signoff.model import ApprovalRequest, CallContext, ToolCall, utcnow
from signoff.model.errors import LeaseHeld
from signoff.model.resolution import Transition, take_lease

if TYPE_CHECKING:
    from signoff.gate.core import Gate

_CANDIDATES = 50


def waiter_id() -> str:
    """This process's name as a waiter: host, pid and a random tag (a restarted process on
    the same pid is another waiter)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def _canonical(name: str, args: Any) -> str:
    """The call as stored: Python values (a guard's datetime) in their JSON form."""
    return json.dumps(
        [name, to_jsonable_python(args)], sort_keys=True, separators=(",", ":"), default=str
    )


def _open(req: ApprovalRequest) -> bool:
    """Pending, or resolved with every call approved and none started yet."""
    if req.kind != "tool_call":
        return False
    if req.pending:
        return True
    return req.status == "resolved" and all(c.runnable and c.execution is None for c in req.calls)


async def reattach(gate: Gate, calls: list[ToolCall], ctx: CallContext) -> ApprovalRequest | None:
    """The open request this step asked before a restart, now leased to this process."""
    wanted = Counter(_canonical(c.name, c.args) for c in calls)
    now = utcnow()
    for req in await gate.store.list_requests(thread=ctx.thread, limit=_CANDIDATES):
        if (
            not _open(req)
            or req.agent != ctx.agent
            or not gate.policy.same_person(req.principal.id, ctx.principal.id)
            or (req.lease_until is not None and req.lease_until > now)
            or Counter(_canonical(a.name, a.args) for a in req.action_requests) != wanted
        ):
            continue
        until = now + timedelta(seconds=gate.settings.lease)

        def take(r: ApprovalRequest, until: datetime = until) -> Transition:
            return take_lease(
                r, gate.waiter_id, until=until, now=utcnow(), reattach=True, in_place=True
            )

        try:
            tr = await gate.update(req.id, take)
        except LeaseHeld:
            continue  # another restarted run took it first
        return tr.request
    return None


async def renew(gate: Gate, req: ApprovalRequest) -> ApprovalRequest:
    """Extend this waiter's lease when it is close to lapsing (raises LeaseHeld if another
    process took the request over meanwhile)."""
    now, lease = utcnow(), gate.settings.lease
    if (
        req.waiter == gate.waiter_id
        and req.lease_until
        and req.lease_until - now > timedelta(seconds=lease * 2 / 3)
    ):
        return req
    until = now + timedelta(seconds=lease)
    try:
        tr = await gate.update(
            req.id,
            lambda r: take_lease(
                r, gate.waiter_id, until=until, now=utcnow(), reattach=False, in_place=True
            ),
        )
    except LeaseHeld:
        return req  # another live process waits on it too: watch, do not take it over
    return tr.request
