"""Grants: standing approvals (or refusals) a person gave for later calls.

A grant never reaches past what its creator saw and could decide: it covers one tool, the
calls the policy sends to one **rule id**, one scope (``thread`` = that thread, agent and
principal; ``agent``; ``principal``; ``global``), optional argument conditions in the
policy's own ``when:`` syntax, and it expires. A policy ``deny`` always wins over a grant; a
grant never satisfies a quorum above one; a deny grant rejects at once.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from signoff.model.calls import CallContext, ToolCall

GrantEffect = Literal["allow", "deny"]
GrantScope = Literal["thread", "agent", "principal", "global"]
GRANT_SCOPES: tuple[GrantScope, ...] = ("thread", "agent", "principal", "global")


class Grant(BaseModel):
    """One stored, audited standing decision. Revoked or expired grants stay for the record."""

    model_config = ConfigDict(extra="forbid")

    id: str
    tool: str
    rule: str
    effect: GrantEffect = "allow"
    scope: GrantScope
    thread: str | None = None
    agent: str | None = None
    principal: str | None = None
    when: dict[str, Any] | None = None
    created_at: datetime
    expires_at: datetime
    created_by: str
    reason: str | None = None
    source_request: str | None = None  # the request whose approve decision created it
    source_call: str | None = None
    revoked_at: datetime | None = None
    revoked_by: str | None = None
    revoke_reason: str | None = None

    def active(self, now: datetime) -> bool:
        return self.revoked_at is None and now < self.expires_at

    def covers(self, call: ToolCall, ctx: CallContext, rule: str, principal_key: str) -> bool:
        """Tool, rule and scope match (the ``when`` conditions are the gate's to test).

        ``principal_key`` is the caller's principal in the comparison form the policy uses
        (NFKC + casefold, aliases resolved); the stored ``principal`` is kept in that form.
        """
        if call.name != self.tool or rule != self.rule:
            return False
        if self.scope == "global":
            return True
        if self.scope == "principal":
            return self.principal == principal_key
        if self.scope == "agent":
            return self.agent == ctx.agent
        return (
            self.thread == ctx.thread
            and self.agent == ctx.agent
            and self.principal == principal_key
        )

    def describe(self) -> str:
        """One line saying exactly what the grant covers (shown before creating one)."""
        verb = "approve" if self.effect == "allow" else "reject"
        who = {
            "thread": f"from {self.agent or 'any agent'} for {self.principal} on thread "
            f"{self.thread}",
            "agent": f"from {self.agent or 'agents without a name'}",
            "principal": f"for {self.principal}",
            "global": "from every agent for everyone",
        }[self.scope]
        when = f" when {json.dumps(self.when, sort_keys=True)}" if self.when else ""
        until = self.expires_at.strftime("%Y-%m-%d %H:%M UTC")
        return f"also {verb} `{self.tool}` calls under rule {self.rule} {who}{when} until {until}"


class GrantRequest(BaseModel):
    """``scope`` of an approve decision asking for a grant: ``{"kind": "agent", "for": "8h",
    "when": {"args.command": {"first_word_in": ["git"]}}}``. ``scope: "thread"`` is the short
    form of ``{"kind": "thread"}``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    kind: Literal["thread", "agent", "principal"]
    for_: str | float | None = Field(default=None, alias="for")
    when: dict[str, Any] | None = None
