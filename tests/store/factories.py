"""Building approval requests and decisions for store tests (also used by the worker scripts,
which run as `python -m tests.store.<worker>`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from signoff.model import (
    Action,
    ActionRequest,
    ApprovalRequest,
    ApproversInfo,
    AuditEvent,
    CallState,
    DecisionRecord,
    PrincipalInfo,
    ReviewConfig,
    Transition,
    new_id,
    utcnow,
)
from signoff.model.grants import Grant
from signoff.model.resolution import apply_decisions, grant_created_event
from signoff.store import Store

Call = tuple[str, str, dict[str, Any]]  # (tool_call_id, tool name, args)


def make_request(
    *,
    request_id: str | None = None,
    thread: str = "thread-1",
    calls: Sequence[Call] = (("call-1", "send_email", {"to": "bob@example.com"}),),
    quorum: int = 1,
    roles: Sequence[str] = (),
    timeout_s: float = 3600.0,
    on_timeout: str = "reject",
    escalate_after_s: float | None = None,
    escalate_to: Sequence[str] = (),
    principal: str = "owner",
    created_at: datetime | None = None,
    kind: str = "tool_call",
) -> ApprovalRequest:
    created = created_at or utcnow()
    approvers = ApproversInfo(roles=list(roles), quorum=quorum, any=not roles)
    configs = [
        ReviewConfig(
            action_name=name,
            allowed_decisions=["approve", "edit", "reject"],
            tool_call_id=call_id,
            editable_args="*",
            approvers=approvers,
            timeout_s=timeout_s,
            on_timeout=on_timeout,  # type: ignore[arg-type]
            escalate_to=ApproversInfo(roles=list(escalate_to)) if escalate_to else None,
            escalate_after_s=escalate_after_s,
        )
        for call_id, name, _ in calls
    ]
    return ApprovalRequest(
        id=request_id or new_id("req"),
        kind=kind,  # type: ignore[arg-type]
        thread=thread,
        principal=PrincipalInfo(id=principal),
        action_requests=[
            ActionRequest(name=name, args=args, tool_call_id=call_id, rule="needs-review")
            for call_id, name, args in calls
        ],
        review_configs=configs,
        calls=[
            CallState(tool_call_id=call_id, action=Action(name=name, args=args), quorum=quorum)
            for call_id, name, args in calls
        ],
        created_at=created,
        expires_at=created + timedelta(seconds=timeout_s),
        escalate_at=created + timedelta(seconds=escalate_after_s) if escalate_after_s else None,
        policy_hash="policy-1",
    )


def created_events(request: ApprovalRequest) -> list[AuditEvent]:
    return [
        AuditEvent(
            event="created",
            at=request.created_at,
            request_id=request.id,
            thread=request.thread,
            tool=action.name,
            tool_call_id=action.tool_call_id,
            principal=request.principal.id,
            rule=action.rule,
            policy_hash=request.policy_hash,
            data={"args": action.args},
        )
        for action in request.action_requests
    ]


def decision(
    call_id: str = "call-1",
    type: str = "approve",
    approver: str = "alice",
    *,
    message: str | None = None,
    scope: str = "call",
    edited_args: dict[str, Any] | None = None,
    name: str = "send_email",
) -> DecisionRecord:
    return DecisionRecord(
        tool_call_id=call_id,
        type=type,  # type: ignore[arg-type]
        approver=approver,
        message=message,
        scope=scope,  # type: ignore[arg-type]
        edited_action=Action(name=name, args=edited_args) if edited_args is not None else None,
        at=utcnow(),
    )


async def decide(
    store: Store,
    request_id: str,
    *decisions: DecisionRecord,
    roles: Iterable[str] = (),
    now: datetime | None = None,
) -> Transition:
    """Record ``decisions`` through ``update_request`` the way the gate does."""
    when = now or utcnow()
    return await store.update_request(
        request_id,
        lambda req: apply_decisions(req, list(decisions), approver_roles=roles, now=when),
    )


def make_grant(
    *,
    grant_id: str | None = None,
    created_at: datetime | None = None,
    ttl: timedelta = timedelta(hours=8),
    **fields: Any,
) -> Grant:
    """A thread grant for ``deploy`` under rule ``prod-deploy``, 8 hours long."""
    created = created_at or utcnow()
    values: dict[str, Any] = {
        "id": grant_id or new_id("grant"),
        "tool": "deploy",
        "rule": "prod-deploy",
        "effect": "allow",
        "scope": "thread",
        "thread": "t-1",
        "agent": "billing-bot",
        "principal": "erin",
        "when": {"args.version": {"startswith": "v"}},
        "created_at": created,
        "expires_at": created + ttl,
        "created_by": "bob",
        "reason": "release week",
    }
    values.update(fields)
    return Grant(**values)


async def grant_created(store: Store, **kw: Any) -> Grant:
    """Create :func:`make_grant` (``kw``) with its ``grant_created`` event."""
    grant = make_grant(**kw)
    return await store.create_grant(grant, [grant_created_event(grant, grant.created_at)])


def revoke_event(grant_id: str, by: str = "carol") -> AuditEvent:
    return AuditEvent(event="grant_revoked", actor=by, data={"grant_id": grant_id})


async def revoke_grant(store: Store, grant_id: str, by: str = "carol") -> Grant:
    """Revoke now, as ``by``, with a ``grant_revoked`` event."""
    return await store.revoke_grant(
        grant_id, by=by, reason="done", now=utcnow(), events=[revoke_event(grant_id, by)]
    )


def subprocess_env() -> dict[str, str]:
    """Environment for a child Python that must import what this process imports."""
    import os
    import sys

    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
