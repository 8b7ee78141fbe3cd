"""Making and revoking grants: what a grant may cover, who may create one, and the gate's grant
API (:class:`GrantMethods`, a mixin of :class:`~signoff.gate.core.Gate`). Checked here, stored
with its audit event, effective in this process at once (the cache), elsewhere within a second.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from signoff.gate.grants import GrantCache, GrantSettings
from signoff.model import (
    ApprovalRequest,
    AuditEvent,
    DecisionError,
    NotAuthorized,
    NotFound,
    PolicyError,
    new_id,
    utcnow,
)
from signoff.model.grants import Grant, GrantEffect, GrantRequest, GrantScope
from signoff.model.resolution import grant_created_event
from signoff.policy.durations import format_duration, parse_duration
from signoff.policy.grants import compile_grant_condition, rule_review
from signoff.store import Store

if TYPE_CHECKING:
    from signoff.gate.core import Gate


def ttl_of(settings: GrantSettings, wanted: str | float | None) -> float:
    """The lifetime asked for (default ``default_ttl``), never above ``max_ttl``."""
    if wanted is None:
        return settings.default_ttl
    try:
        seconds = parse_duration(wanted)
    except PolicyError as exc:
        raise DecisionError(exc.message, field="scope.for") from None
    if seconds <= 0:
        raise DecisionError("a grant's lifetime must be positive", field="scope.for")
    if seconds > settings.max_ttl:
        raise DecisionError(
            f"a grant may last at most grants.max_ttl ({format_duration(settings.max_ttl)})",
            field="scope.for",
        )
    return seconds


def grant_from_decision(
    gate: Gate,
    req: ApprovalRequest,
    call_id: str,
    scope: GrantRequest,
    approver: str,
    reason: str | None,
    where: str,
) -> Grant:
    """The grant an approve decision with a wider ``scope`` asks for: what the approver saw —
    this tool, this call's rule, this agent/principal/thread — with an expiry."""
    cfg = req.config(call_id)
    action = req.action_request(call_id)
    if not cfg.allow_thread_approval:
        raise DecisionError(
            f"the policy forbids standing approvals for {cfg.action_name} "
            "(allow_thread_approval: false)",
            field=f"{where}.scope",
        )
    if not cfg.approvers.needs_one:
        raise DecisionError(
            f"{cfg.action_name} needs {cfg.approvers.quorum} approvals under rule "
            f"{action.rule}; a standing approval cannot stand in for a quorum or a chain",
            field=f"{where}.scope",
        )
    try:
        compile_grant_condition(gate.policy, scope.when, where=f"{where}.scope")
    except PolicyError as exc:
        raise DecisionError(exc.message, field=f"{where}.scope.when") from None
    now = utcnow()
    ttl = ttl_of(gate.grant_settings, scope.for_)
    key = gate.policy.person_key(req.principal.id)
    return Grant(
        id=new_id("grant"),
        tool=action.name,
        rule=action.rule,
        effect="allow",
        scope=scope.kind,
        thread=req.thread if scope.kind == "thread" else None,
        agent=req.agent if scope.kind in ("thread", "agent") else None,
        principal=key if scope.kind in ("thread", "principal") else None,
        when=scope.when,
        created_at=now,
        expires_at=now + timedelta(seconds=ttl),
        created_by=approver,
        reason=reason,
        source_request=req.id,
        source_call=call_id,
    )


def check_creator(gate: Gate, grant: Grant) -> None:
    """Who may create a grant: for ``thread``/``agent``/``principal`` scope, a person who could
    approve such a call alone under the rule; for ``global`` and every deny grant, a holder of
    one of ``grants.admin_roles``."""
    who, roles = grant.created_by, gate.policy.roles_of(grant.created_by)
    admin = bool(roles & set(gate.grant_settings.admin_roles))
    if grant.scope == "global" or grant.effect == "deny":
        if not admin:
            raise NotAuthorized(
                f"{who} may not create a {grant.scope} {grant.effect} grant: it needs one of "
                f"the roles {', '.join(gate.grant_settings.admin_roles)} (grants.admin_roles)",
                field="created_by",
            )
        return
    spec = rule_review(gate.policy, grant.tool, grant.rule)
    if spec is None:
        raise DecisionError(
            f"rule {grant.rule!r} does not ask for approval of {grant.tool}; "
            "see `signoff policy explain` for the rule a call goes to",
            field="rule",
        )
    if not spec.approvers.needs_one:
        raise DecisionError(
            f"rule {grant.rule} needs {spec.approvers.quorum} approvals; a standing approval "
            "cannot stand in for a quorum or a chain",
            field="rule",
        )
    if not spec.approvers.admits(who, roles, gate.policy.person_key):
        raise NotAuthorized(
            f"{who} may not approve {grant.tool} under rule {grant.rule} alone, so may not "
            "grant it either",
            field="created_by",
        )
    if spec.forbid_self_approval and gate.policy.same_person(who, grant.principal):
        raise NotAuthorized(
            f"{who} may not grant approvals of their own calls (forbid_self_approval)",
            field="created_by",
        )


def new_grant(
    gate: Gate,
    *,
    tool: str,
    rule: str,
    effect: GrantEffect,
    scope: GrantScope,
    created_by: str,
    thread: str | None = None,
    agent: str | None = None,
    principal: str | None = None,
    when: dict[str, Any] | None = None,
    ttl: str | float | None = None,
    reason: str | None = None,
) -> Grant:
    """A grant made directly (CLI ``signoff grant add``, ``POST /v1/grants``), checked."""
    needed = {"thread": ("thread", "agent", "principal"), "agent": ("agent",)}
    needed |= {"principal": ("principal",), "global": ()}
    given = {"thread": thread, "agent": agent, "principal": principal}
    missing = [name for name in needed[scope] if not given[name]]
    if missing:
        raise DecisionError(f"a {scope} grant needs {', '.join(missing)}", field=missing[0])
    try:
        compile_grant_condition(gate.policy, when)
    except PolicyError as exc:
        raise DecisionError(exc.message, field="when") from None
    now = utcnow()
    grant = Grant(
        id=new_id("grant"),
        tool=tool,
        rule=rule,
        effect=effect,
        scope=scope,
        thread=thread if scope == "thread" else None,
        agent=agent if scope in ("thread", "agent") else None,
        principal=gate.policy.person_key(principal)
        if principal and scope in ("thread", "principal")
        else None,
        when=when,
        created_at=now,
        expires_at=now + timedelta(seconds=ttl_of(gate.grant_settings, ttl)),
        created_by=created_by,
        reason=reason,
    )
    check_creator(gate, grant)
    return grant


def created_event(grant: Grant) -> AuditEvent:
    return grant_created_event(grant, grant.created_at)


def revoked_event(grant: Grant, by: str, reason: str | None, now: datetime) -> AuditEvent:
    return AuditEvent(
        event="grant_revoked",
        at=now,
        tool=grant.tool,
        actor=by,
        principal=grant.principal,
        agent=grant.agent,
        thread=grant.thread,
        rule=grant.rule,
        data={"grant_id": grant.id, **({"reason": reason} if reason else {})},
    )


class GrantMethods:
    """The gate's grant API (a mixin of :class:`~signoff.gate.core.Gate`): create, revoke and
    list standing approvals, each stored with its audit event and effective at once here."""

    store: Store
    grant_cache: GrantCache

    def grant_preview(self, req: ApprovalRequest, call_id: str, approver: str) -> str:
        """The sentence of the grant that approving ``call_id`` "for this thread" would create
        (its exact scope and expiry), for a surface to show before the approver confirms.
        Raises the gate's error where the policy forbids such a grant."""
        gate: Gate = self  # type: ignore[assignment]
        scope = GrantRequest(kind="thread")
        return grant_from_decision(gate, req, call_id, scope, approver, None, "decision").describe()

    async def agrant(self, **options: Any) -> Grant:
        """Create a grant (see :func:`new_grant` for the options); checks who may create it."""
        gate: Gate = self  # type: ignore[assignment]
        await gate.astart()
        grant = new_grant(gate, **options)
        stored = await gate.store.create_grant(grant, [created_event(grant)])
        self.grant_cache.put(stored)
        return stored

    async def arevoke_grant(self, grant_id: str, *, by: str, reason: str | None = None) -> Grant:
        """Revoke a grant: its creator, or a holder of ``grants.admin_roles``."""
        gate: Gate = self  # type: ignore[assignment]
        await gate.astart()
        current = await gate.store.get_grant(grant_id)
        if current is None:
            raise NotFound(f"no grant {grant_id!r}")
        admin = bool(gate.policy.roles_of(by) & set(gate.grant_settings.admin_roles))
        if not admin and not gate.policy.same_person(by, current.created_by):
            raise NotAuthorized(
                f"{by} may not revoke grant {grant_id}: only its creator "
                f"({current.created_by}) or one of the roles "
                f"{', '.join(gate.grant_settings.admin_roles)} may",
                field="by",
            )
        now = utcnow()
        revoked = await gate.store.revoke_grant(
            grant_id,
            by=by,
            reason=reason,
            now=now,
            events=[revoked_event(current, by, reason, now)],
        )
        self.grant_cache.put(revoked)
        return revoked

    async def alist_grants(self, *, active: bool = False, limit: int = 1000) -> list[Grant]:
        gate: Gate = self  # type: ignore[assignment]
        await gate.astart()
        return await gate.store.list_grants(active_at=utcnow() if active else None, limit=limit)

    def grant(self, **options: Any) -> Grant:
        gate: Gate = self  # type: ignore[assignment]
        return gate.run_sync(self.agrant(**options))

    def revoke_grant(self, grant_id: str, *, by: str, reason: str | None = None) -> Grant:
        gate: Gate = self  # type: ignore[assignment]
        return gate.run_sync(self.arevoke_grant(grant_id, by=by, reason=reason))

    def list_grants(self, *, active: bool = False, limit: int = 1000) -> list[Grant]:
        gate: Gate = self  # type: ignore[assignment]
        return gate.run_sync(self.alist_grants(active=active, limit=limit))
