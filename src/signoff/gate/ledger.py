"""Exactly-once execution of an approved call, shared by the local and the remote gate."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from signoff.model import ApprovalRequest

Claim = Callable[[str, str], Awaitable[None]]
Finish = Callable[..., Awaitable[None]]


async def run_once(
    req: ApprovalRequest,
    call_id: str,
    run: Callable[[dict[str, Any]], Awaitable[Any]],
    *,
    claim: Claim,
    finish: Finish,
) -> Any:
    """Claim ``executing`` on the ledger, run with the final arguments, record the outcome.

    A second claim raises :class:`AlreadyExecuted`; a crash between claim and finish leaves
    ``executing`` for a human to reconcile, never a silent re-run.
    """
    args = dict(req.call(call_id).action.args)
    await claim(req.id, call_id)
    try:
        result = await run(args)
    except BaseException as exc:
        await finish(req.id, call_id, error=f"{type(exc).__name__}: {exc}")
        raise
    await finish(req.id, call_id)
    return result
