"""What the checks decide about a call before any human is involved."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, get_args

from signoff.model.identity import PersonKey, contains_person, person_key
from signoff.model.intent import IntentSpec, Judgement

VerdictKind = Literal["allow", "deny", "require_approval"]
DecisionType = Literal["approve", "edit", "reject", "respond"]
OnTimeout = Literal["reject", "allow", "escalate"]
Risk = Literal["low", "medium", "high", "critical"]

VERDICT_KINDS: tuple[VerdictKind, ...] = get_args(VerdictKind)
DECISION_TYPES: tuple[DecisionType, ...] = get_args(DecisionType)
RISK_LEVELS: tuple[Risk, ...] = get_args(Risk)
ON_TIMEOUT: tuple[OnTimeout, ...] = get_args(OnTimeout)


def risk_at_least(risk: Risk | None, floor: Risk) -> bool:
    return risk is not None and RISK_LEVELS.index(risk) >= RISK_LEVELS.index(floor)


class Group(Protocol):
    """What :func:`admits` reads: :class:`Approvers` and its stored form
    (:class:`~signoff.model.requests.ApproversInfo`) both have it."""

    @property
    def roles(self) -> Sequence[str]: ...
    @property
    def users(self) -> Sequence[str]: ...
    @property
    def any(self) -> bool: ...
    @property
    def chained(self) -> bool: ...
    @property
    def groups(self) -> Sequence[Group]: ...


def admits(group: Group, person: str, roles: Iterable[str], key: PersonKey = person_key) -> bool:
    """Whether ``person`` (holding ``roles``) is in ``group`` — for a chain, in any of its
    groups; names compare by ``key``. The one rule for both forms of a group."""
    if group.chained:
        held = tuple(roles)
        return any(admits(g, person, held, key) for g in group.groups)
    if group.any or contains_person(group.users, person, key):
        return True
    return not set(group.roles).isdisjoint(roles)


@dataclass(frozen=True, slots=True)
class Approvers:
    """Who may decide: anyone holding one of ``roles``, or one of ``users``; ``quorum`` distinct
    people must approve. ``any=True`` admits every person (the single-user / local mode).

    A *chain* names groups instead (see :mod:`signoff.model.chains`): ``stages`` are asked one
    after the other, ``all_of`` all at once, and every group must reach its own quorum;
    ``distinct`` (the default) counts a person once across all groups. A chain's ``quorum`` is
    the total of its groups'. A stage may carry its own ``timeout_s``, ``on_timeout`` and
    escalation (None: the review's).
    """

    roles: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    quorum: int = 1
    any: bool = False
    stages: tuple[Approvers, ...] = ()
    all_of: tuple[Approvers, ...] = ()
    distinct: bool = True
    timeout_s: float | None = None
    on_timeout: OnTimeout | None = None
    escalate_to: Approvers | None = None
    escalate_after_s: float | None = None

    @property
    def chained(self) -> bool:
        """Whether this is a chain (``stages`` or ``all_of``)."""
        return bool(self.stages or self.all_of)

    @property
    def groups(self) -> tuple[Approvers, ...]:
        """A chain's groups (its stages or its ``all_of`` groups); empty otherwise."""
        return self.stages or self.all_of

    @property
    def needs_one(self) -> bool:
        """One person's approval is enough: no quorum, no chain (what a grant may stand in for)."""
        return self.quorum <= 1 and not self.chained

    def admits(self, person: str, roles: Iterable[str], key: PersonKey = person_key) -> bool:
        """Whether ``person`` (holding ``roles``) is in this group — for a chain, in any of its
        groups; names compare by ``key``."""
        return admits(self, person, roles, key)

    def merged(self, other: Approvers) -> Approvers:
        """The union of two groups (used when a request escalates); keeps this quorum."""
        return Approvers(
            roles=tuple(dict.fromkeys(self.roles + other.roles)),
            users=tuple(dict.fromkeys(self.users + other.users)),
            quorum=self.quorum,
            any=self.any or other.any,
        )

    def to_wire(self) -> dict[str, object]:
        if self.chained:
            kind = "stages" if self.stages else "all_of"
            return {
                kind: [g.to_wire() for g in self.groups],
                "distinct": self.distinct,
                "quorum": self.quorum,
            }
        wire: dict[str, object]
        if self.any:
            wire = {"any": True, "quorum": self.quorum}
        else:
            wire = {"roles": list(self.roles), "users": list(self.users), "quorum": self.quorum}
        if self.timeout_s is not None:
            wire["timeout_s"] = self.timeout_s
        if self.on_timeout is not None:
            wire["on_timeout"] = self.on_timeout
        if self.escalate_to is not None:
            wire["escalate_to"] = self.escalate_to.to_wire()
            wire["escalate_after_s"] = self.escalate_after_s
        return wire


ANY_APPROVER = Approvers(any=True)


@dataclass(frozen=True, slots=True)
class ReviewSpec:
    """How a human reviews a call that needs approval (resolved from rule → tool → defaults)."""

    allowed_decisions: tuple[DecisionType, ...] = ("approve", "reject")
    approvers: Approvers = ANY_APPROVER
    editable_args: tuple[str, ...] | Literal["*"] = ()
    forbid_self_approval: bool = True
    allow_thread_approval: bool = True
    risk: Risk | None = None
    timeout_s: float = 3600.0
    on_timeout: OnTimeout = "reject"
    escalate_to: Approvers | None = None
    escalate_after_s: float | None = None
    description: str = ""
    notify: tuple[str, ...] = ()

    def may_edit(self, arg: str) -> bool:
        return self.editable_args == "*" or arg in self.editable_args


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of the checks for one call. Always names the rule that decided.

    ``kind`` is ``allow``, ``deny`` (with ``reason``) or ``require_approval`` (with ``review``).
    ``policy_hash`` identifies the policy version that decided, for the audit.
    """

    kind: VerdictKind
    rule: str
    reason: str | None = None
    review: ReviewSpec | None = None
    policy_hash: str = ""
    risk: Risk | None = None
    description: str | None = None
    errors: tuple[str, ...] = field(default=())
    grant: str | None = None  # the grant that decided instead of a human (allow or deny)
    #: ``intent:`` of the deciding tool/rule while its judge has not answered yet: the
    #: verdict is *pending* — not allowed until the gate runs the judge (``Gate.ajudge``).
    intent: IntentSpec | None = None
    #: the judge's answer, once it ran (shown to approvers, audited)
    judgement: Judgement | None = None

    @property
    def allowed(self) -> bool:
        """An allow whose intent check (if any) is done: fail closed on a pending one."""
        return self.kind == "allow" and self.intent is None

    @property
    def judge_pending(self) -> bool:
        """An intent judge must answer before this verdict stands (see ``Gate.ajudge``)."""
        return self.intent is not None

    @property
    def denied(self) -> bool:
        return self.kind == "deny"

    @property
    def needs_approval(self) -> bool:
        return self.kind == "require_approval"

    def to_wire(self, tool_call_id: str) -> dict[str, object]:
        wire: dict[str, object] = {
            "tool_call_id": tool_call_id,
            "verdict": self.kind,
            "rule": self.rule,
            "reason": self.reason,
        }
        if self.grant is not None:
            wire["grant"] = self.grant
        return wire

    @staticmethod
    def allow(rule: str, *, policy_hash: str = "", risk: Risk | None = None) -> Verdict:
        return Verdict("allow", rule, policy_hash=policy_hash, risk=risk)

    @staticmethod
    def deny(
        rule: str,
        reason: str,
        *,
        policy_hash: str = "",
        risk: Risk | None = None,
        errors: tuple[str, ...] = (),
    ) -> Verdict:
        return Verdict(
            "deny", rule, reason=reason, policy_hash=policy_hash, risk=risk, errors=errors
        )

    @staticmethod
    def require_approval(
        rule: str,
        review: ReviewSpec,
        *,
        reason: str | None = None,
        policy_hash: str = "",
        description: str | None = None,
    ) -> Verdict:
        return Verdict(
            "require_approval",
            rule,
            reason=reason,
            review=review,
            policy_hash=policy_hash,
            risk=review.risk,
            description=description if description is not None else review.description,
        )
