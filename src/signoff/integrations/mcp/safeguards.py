"""Fail-closed helpers shared by the proxy and the inquiry server: refusals the model can
read, refusals the audit can see, withdrawing a request, and noticing that no approver was
reached."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types

from signoff.gate import Gate
from signoff.model import AlreadyDecided, ApprovalRequest, AuditEvent, CallContext, ToolCall
from signoff.store import AuditQuery

log = logging.getLogger("signoff.mcp")


def refusal(text: str, **outcome: Any) -> types.CallToolResult:
    """A tool result the model reads: the call did not run (never a protocol error)."""
    meta = {"signoff/outcome": outcome} if outcome else None
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=True, _meta=meta
    )


def audit_refusal(gate: Gate, call: ToolCall, ctx: CallContext, rule: str, reason: str) -> None:
    """Record a refusal decided outside the policy (unknown tool, refused answer)."""
    try:
        gate.store.audit_nowait(
            AuditEvent(
                event="denied",
                thread=ctx.thread,
                tool=call.name,
                tool_call_id=call.id,
                principal=ctx.principal.id,
                agent=ctx.agent,
                rule=rule,
                policy_hash=gate.policy.short_hash,
                data={"reason": reason},
            )
        )
    except Exception as exc:
        log.error("audit failed: %s", exc)


async def withdraw(gate: Gate, request_id: str, *, actor: str, reason: str) -> None:
    """Cancel a pending request (audited; channels take back their prompts)."""
    try:
        await gate.acancel(request_id, actor=actor, reason=reason)
    except AlreadyDecided:
        pass  # decided meanwhile: that outcome stands
    except Exception as exc:
        log.error("could not cancel %s: %s", request_id, exc)


@asynccontextmanager
async def withdrawn_on_cancel(
    gate: Gate, request_id: str, *, actor: str, reason: str
) -> AsyncIterator[None]:
    """Withdraw ``request_id`` (shielded) if the block is cancelled — the client cancelled
    or went away — so a stored request is never left pending with nobody to receive the
    result; the cancellation then continues."""
    try:
        yield
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await withdraw(gate, request_id, actor=actor, reason=reason)
        raise


async def notification_failures(gate: Gate, req: ApprovalRequest) -> list[str]:
    """What failed when every configured channel failed to notify (else []): then nobody
    knows the request exists, and holding the call would only end in a timeout."""
    if not gate.channels:
        return []
    rows = await gate.store.read_audit(AuditQuery(request_id=req.id, limit=200))
    if any(r.event == "notified" for r in rows):
        return []
    return [
        f"{r.actor}: {r.data.get('error', '?')}" for r in rows if r.event == "notification_failed"
    ]
