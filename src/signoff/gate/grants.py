"""Grants (standing approvals and refusals) on the gate's check path.

The check path stays synchronous and I/O-free: active grants live in an in-memory
:class:`GrantCache`, loaded when the gate starts, updated at once for grants this process
creates or revokes, and refreshed when the store's grants version changes — the gate looks
every ``REFRESH_S`` (a cheap one-row read), so a revocation made by another process takes
effect within a second.

:class:`GrantsStage` runs after the policy: a call the policy sends to rule R for approval is
approved at once by an active allow grant for the same tool and rule whose scope and
conditions cover it (never when R needs a quorum above one), and rejected at once by a deny
grant. A policy ``allow`` or ``deny`` is never changed by a grant.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping, Sequence
from contextlib import suppress
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import Field

from signoff._failing import Failing
from signoff.gate.checking import CheckState
from signoff.model import (
    PolicyError,
    Verdict,
    utcnow,
)
from signoff.model.grants import Grant
from signoff.policy import Policy
from signoff.policy.grants import GrantCondition, compile_grant_condition
from signoff.policy.settings import Duration, SettingsSection, expand_env, validated
from signoff.store import Store

if TYPE_CHECKING:
    pass

log = logging.getLogger("signoff.gate")

REFRESH_S = 0.5


class GrantSettings(SettingsSection):
    """The ``grants:`` section: default and longest lifetime, who may make wide grants."""

    default_ttl: Duration = 8 * 3600.0
    max_ttl: Duration = 30 * 86400.0
    admin_roles: list[str] = Field(default_factory=lambda: ["admin"])

    @classmethod
    def from_sections(
        cls, sections: Mapping[str, Mapping[str, Any]], *, filename: str = "signoff.yaml"
    ) -> GrantSettings:
        data = expand_env(dict(sections.get("grants") or {}), "grants")
        settings = validated(_Wrapper, {"grants": data}, filename).grants
        if settings.default_ttl > settings.max_ttl:
            raise PolicyError(
                "default_ttl is longer than max_ttl", path=f"{filename}.grants.default_ttl"
            )
        return settings


class _Wrapper(SettingsSection):
    grants: GrantSettings = Field(default_factory=GrantSettings)


def check_sections(sections: Mapping[str, Mapping[str, Any]], *, filename: str) -> None:
    """The ``grants:`` checker of the section registry (:mod:`signoff.policy.sections`)."""
    GrantSettings.from_sections(sections, filename=filename)


class GrantCache:
    """Active grants with their compiled conditions, for the synchronous check path."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._lock = threading.Lock()
        self._grants: dict[str, tuple[Grant, GrantCondition]] = {}
        self._by_key: dict[tuple[str | None, ...], list[tuple[Grant, GrantCondition]]] = {}
        self.version: int | None = None
        self._task: asyncio.Future[None] | None = None
        self.refresh_failing = Failing(log, "refreshing grants")

    def __len__(self) -> int:
        return len(self._grants)

    def replace(self, grants: Sequence[Grant], version: int | None) -> None:
        compiled = {}
        for grant in grants:
            entry = self._compile(grant)
            if entry is not None:
                compiled[grant.id] = entry
        with self._lock:
            self._grants = compiled
            self._index()
            self.version = version

    def put(self, grant: Grant) -> None:
        """A grant this process created or revoked (effective at once, before any refresh)."""
        with self._lock:
            self._grants.pop(grant.id, None)
            entry = self._compile(grant) if grant.revoked_at is None else None
            if entry is not None:
                self._grants[grant.id] = entry
            self._index()

    def drop(self, grant_id: str) -> None:
        with self._lock:
            if self._grants.pop(grant_id, None) is not None:
                self._index()

    def _compile(self, grant: Grant) -> tuple[Grant, GrantCondition] | None:
        try:
            return grant, compile_grant_condition(self.policy, grant.when)
        except PolicyError:
            log.warning("grant %s has conditions this policy cannot read; ignored", grant.id)
            return None

    def _index(self) -> None:
        """Grants by (tool, rule, scope key): a check looks at four short lists, however many
        grants other agents, principals and threads hold."""
        index: dict[tuple[str | None, ...], list[tuple[Grant, GrantCondition]]] = {}
        for entry in self._grants.values():
            index.setdefault(_key_of(entry[0]), []).append(entry)
        for entries in index.values():  # deny first: a refusal wins over an approval
            entries.sort(key=lambda e: (e[0].effect != "deny", e[0].created_at))
        self._by_key = index

    def match(self, state: CheckState, rule: str, now: datetime) -> Grant | None:
        index = self._by_key
        if not index:
            return None
        call, ctx = state.call, state.ctx
        pk = self.policy.person_key(ctx.principal.id)
        found = [
            e
            for key in (
                (call.name, rule, "global"),
                (call.name, rule, "agent", ctx.agent),
                (call.name, rule, "principal", pk),
                (call.name, rule, "thread", ctx.thread, ctx.agent, pk),
            )
            for e in index.get(key, ())
        ]
        found.sort(key=lambda e: (e[0].effect != "deny", e[0].created_at))
        for grant, condition in found:
            if grant.active(now) and grant.covers(call, ctx, rule, pk) and condition(call, ctx):
                return grant
        return None

    # ------------------------------------------------------------------ refreshing
    async def load(self, store: Store) -> None:
        version = await store.grants_version()
        self.replace(await store.list_grants(active_at=utcnow()), version)

    async def refresh_if_changed(self, store: Store) -> None:
        version = await store.grants_version()
        if version != self.version:
            self.replace(await store.list_grants(active_at=utcnow()), version)

    def start(self, store: Store) -> None:
        """Refresh in the background on the running loop (the gate's portal)."""
        self._task = asyncio.ensure_future(self._refresh_loop(store))

    async def _refresh_loop(self, store: Store) -> None:
        # A cheap version read, not a wait for a decision: the one periodic look the gate
        # takes so grants changed by other processes (CLI, replicas) apply within a second.
        while True:
            await asyncio.sleep(REFRESH_S)
            try:
                await self.refresh_if_changed(store)
            except Exception as exc:
                self.refresh_failing.failed(exc, retrying="keeping the ones loaded")
            else:
                self.refresh_failing.worked()

    async def stop(self) -> None:
        task = self._task
        if task is not None:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task


def _key_of(grant: Grant) -> tuple[str | None, ...]:
    if grant.scope == "global":
        return (grant.tool, grant.rule, "global")
    if grant.scope == "agent":
        return (grant.tool, grant.rule, "agent", grant.agent)
    if grant.scope == "principal":
        return (grant.tool, grant.rule, "principal", grant.principal)
    return (grant.tool, grant.rule, "thread", grant.thread, grant.agent, grant.principal)


class GrantsStage:
    """After the policy: standing approvals and refusals for calls that need a human."""

    name = "grants"

    def __init__(self, policy: Policy, cache: GrantCache) -> None:
        self.policy = policy
        self.cache = cache

    def __call__(self, state: CheckState) -> None:
        verdict = state.verdict
        if verdict is None or not verdict.needs_approval or not len(self.cache):
            return
        grant = self.cache.match(state, verdict.rule, utcnow())
        if grant is None:
            return
        if grant.effect == "deny":
            why = f": {grant.reason}" if grant.reason else ""
            state.verdict = Verdict(
                "deny",
                verdict.rule,
                reason=f"rejected by standing grant {grant.id} of {grant.created_by}{why}",
                policy_hash=verdict.policy_hash,
                risk=verdict.risk,
                grant=grant.id,
            )
            return
        review = verdict.review
        if review is not None and not review.approvers.needs_one:
            return  # a grant never stands in for a quorum or an approval chain
        # The intent judge still runs: a grant stands in for the human, not for the judge
        # (whose objection brings the review back).
        state.verdict = Verdict(
            "allow", verdict.rule, policy_hash=verdict.policy_hash, risk=verdict.risk,
            grant=grant.id, intent=verdict.intent,
            review=verdict.review if verdict.intent is not None else None,
        )  # fmt: skip
