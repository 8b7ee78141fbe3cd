"""Holding an MCP request open while a human decides.

The wait itself is the gate's (woken by the store, no polling); this adds what an open MCP
request needs around it: a heartbeat every few seconds, an optional in-client prompt running
beside the wait (cancelled — so withdrawn at the client — when someone else answers first),
and withdrawal of the pending request when the client cancels or disconnects.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio

from signoff.gate import Gate
from signoff.model import ApprovalRequest


async def hold(
    gate: Gate,
    req: ApprovalRequest,
    *,
    beat: Callable[[ApprovalRequest], Awaitable[None]],
    every: float,
    beside: Callable[[], Coroutine[Any, Any, None]] | None = None,
    limit: float | None = None,
    withdraw: Callable[[str], Awaitable[None]] | None = None,
) -> ApprovalRequest:
    """Wait until ``req`` is decided, expires or is cancelled (or ``limit`` seconds pass).

    Store errors propagate after the prompt is cancelled; a cancelled caller runs
    ``withdraw(request_id)`` shielded, then the cancellation continues.
    """
    failure: Exception | None = None
    give_up = None if limit is None else anyio.current_time() + limit
    try:
        async with anyio.create_task_group() as tg:
            if beside is not None:
                tg.start_soon(beside)
            try:
                while req.pending:
                    await beat(req)
                    step = every
                    if give_up is not None:
                        step = min(step, give_up - anyio.current_time())
                        if step <= 0:
                            break
                    try:
                        req = await gate.await_request(req.id, timeout=step)
                    except Exception as exc:  # re-raised below, outside the task group
                        failure = exc
                        break
            finally:
                tg.cancel_scope.cancel()
    except anyio.get_cancelled_exc_class():
        if withdraw is not None:
            with anyio.CancelScope(shield=True):
                await withdraw(req.id)
        raise
    if failure is not None:
        raise failure
    return req
