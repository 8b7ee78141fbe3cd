"""Waiting for a decision: woken by the store's push, never a polling loop."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from signoff.gate.reattach import renew
from signoff.gate.sweeper import due_mutation
from signoff.model import ApprovalRequest, utcnow

if TYPE_CHECKING:
    from signoff.gate.core import Gate


async def await_request(
    gate: Gate, request_id: str, timeout: float | None, current: ApprovalRequest | None = None
) -> ApprovalRequest:
    """Until the request is terminal or ``timeout`` passes; applies a deadline that passes
    while waiting itself, so expiry never depends on the sweeper for a live waiter.
    ``current``: the request as the caller has just read it, instead of a first read."""
    loop = asyncio.get_running_loop()
    give_up = None if timeout is None else loop.time() + timeout
    while True:
        req = current if current is not None else await gate.fetch(request_id)
        current = None  # the store's wait reads it again after registering the waiter
        if req.terminal:
            return req
        req = await renew(gate, req)  # a live waiter keeps its lease (no re-attach by others)
        until_due = max(0.0, (req.due_at - utcnow()).total_seconds())
        budget = min(until_due + 0.05, gate.settings.lease / 3)
        if give_up is not None:
            remaining = give_up - loop.time()
            if remaining <= 0:
                return req
            budget = min(budget, remaining)
        req = await gate.store.wait(request_id, timeout=budget)
        if req.terminal:
            return req
        if utcnow() >= req.due_at:
            tr = await gate.update(request_id, due_mutation)
            await gate.after_change(tr)
