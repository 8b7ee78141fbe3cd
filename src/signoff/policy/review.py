"""Review fields (who approves, how, by when) and their inheritance rule → tool → defaults.

Each level of the file is parsed into a :class:`Layer` of the fields it sets. A decision point
(a rule, a tool's default, ``unknown_tool``…) resolves its chain of layers once at load into a
finished :class:`ReviewSpec`, so nothing is merged while a call waits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, cast

from signoff.model import (
    ANY_APPROVER,
    DECISION_TYPES,
    RISK_LEVELS,
    Approvers,
    DecisionType,
    OnTimeout,
    PolicyError,
    ReviewSpec,
    Risk,
)
from signoff.model.intent import INTENT_ACTIONS, IntentAction, IntentSpec
from signoff.policy.durations import format_duration, parse_duration
from signoff.policy.people import People
from signoff.policy.source import Loc, Problems
from signoff.policy.templates import Template, TemplateError, compile_template

REVIEW_KEYS = (
    "allowed_decisions", "editable_args", "approvers", "forbid_self_approval",
    "allow_thread_approval", "risk", "timeout", "on_timeout", "escalate_to", "escalate_after",
    "description", "notify", "intent",
)  # fmt: skip
#: Review fields that also mean something for allow/deny, so they are not "approval only".
SHARED_KEYS = ("risk", "description", "intent")
INTENT_KEYS = ("judge", "on_mismatch", "on_unclear", "on_error")
APPROVAL_ONLY_KEYS = tuple(k for k in REVIEW_KEYS if k not in SHARED_KEYS)
CHAIN_KEYS = frozenset({"stages", "all_of"})
STAGE_KEYS = ("timeout", "on_timeout", "escalate_to", "escalate_after")
CHANNELS = (
    "slack", "discord", "email", "line", "telegram", "feishu", "dingtalk", "webhooks", "teams",
    "console", "web",
)  # fmt: skip
ON_TIMEOUT_VALUES = ("reject", "allow", "escalate")
DEFAULT_DESCRIPTION = "{tool} requested by {principal.id}"
DEFAULT_TIMEOUT_S = 3600.0
ANY_NOTE = "any known person may approve (fine for a single developer; set approvers for teams)"


@dataclass(slots=True)
class Layer:
    """The review fields one level of the file sets, parsed, with where each was set."""

    loc: Loc
    values: dict[str, Any] = field(default_factory=dict)

    def origin(self, key: str) -> Loc:
        return self.loc.key(key)


@dataclass(frozen=True, slots=True)
class Resolved:
    """A decision point's finished review: the spec (description filled in per call)."""

    spec: ReviewSpec
    description: Template
    risk: Risk | None
    approvers_given: bool
    intent: IntentSpec | None = None


class ReviewCompiler:
    """Parses review fields and resolves chains, reporting problems with path and line."""

    def __init__(
        self,
        problems: Problems,
        people: People,
        judges: frozenset[str] = frozenset(),
        channels: frozenset[str] = frozenset(),
    ) -> None:
        self.problems = problems
        self.people = people
        self.judges = judges  # the names under `judges:`
        self.channels = channels  # the names under `channels:`
        self.directory_roles = people.roles
        self.held_roles = frozenset(r for p in people.values() for r in p.roles)
        self._default_description = compile_template(DEFAULT_DESCRIPTION, self.directory_roles)

    # ------------------------------------------------------------ parsing one level
    def layer(self, data: Mapping[Any, Any], loc: Loc) -> Layer:
        out = Layer(loc)
        for key in REVIEW_KEYS:
            if key in data:
                value = self._parse(key, data[key], loc.key(key))
                if value is not None:
                    out.values[key] = value
        return out

    def _parse(self, key: str, value: object, loc: Loc) -> Any:
        try:
            return _PARSERS[key](self, value, loc)
        except PolicyError as exc:
            self.problems.add(loc, exc.message)
            return None

    def _allowed_decisions(self, value: object, loc: Loc) -> tuple[DecisionType, ...]:
        items = _string_list(value, "allowed_decisions", "[approve, reject]")
        bad = [v for v in items if v not in DECISION_TYPES]
        if bad:
            raise PolicyError(f"unknown decision(s) {bad}; choose from {list(DECISION_TYPES)}")
        return cast(tuple[DecisionType, ...], tuple(dict.fromkeys(items)))

    def _editable_args(self, value: object, loc: Loc) -> tuple[str, ...] | str:
        if value == "*":
            return "*"
        return tuple(_string_list(value, "editable_args", '[amount, memo] or "*"'))

    def _approvers(self, value: object, loc: Loc) -> Approvers:
        return self.approvers(value, loc, escalation=False)

    def _escalate_to(self, value: object, loc: Loc) -> Approvers:
        return self.approvers(value, loc, escalation=True)

    def _bool(self, value: object, loc: Loc) -> bool:
        if not isinstance(value, bool):
            raise PolicyError(f"needs true or false, got {value!r}")
        return value

    def _risk(self, value: object, loc: Loc) -> Risk:
        if value not in RISK_LEVELS:
            raise PolicyError(f"risk must be one of {list(RISK_LEVELS)}, got {value!r}")
        return value

    def _duration(self, value: object, loc: Loc) -> float:
        return parse_duration(value)

    def _on_timeout(self, value: object, loc: Loc) -> OnTimeout:
        if value not in ON_TIMEOUT_VALUES:
            raise PolicyError(f"on_timeout must be one of {list(ON_TIMEOUT_VALUES)}, got {value!r}")
        return cast(OnTimeout, value)

    def _description(self, value: object, loc: Loc) -> Template:
        try:
            return compile_template(value, self.directory_roles)
        except TemplateError as exc:
            raise PolicyError(str(exc)) from None

    def _intent(self, value: object, loc: Loc) -> IntentSpec:
        """``intent: {judge, on_mismatch, on_unclear, on_error}`` (or just a judge name)."""
        if isinstance(value, str):
            value = {"judge": value}
        if not isinstance(value, Mapping):
            raise PolicyError(
                "intent is a mapping like {judge: fast, on_mismatch: deny}, got "
                f"{type(value).__name__}"
            )
        unknown = [str(k) for k in value if k not in INTENT_KEYS]
        if unknown:
            raise PolicyError(f"unknown intent key(s) {unknown}; allowed: {list(INTENT_KEYS)}")
        judge = value.get("judge")
        if not isinstance(judge, str) or not judge:
            raise PolicyError("intent needs `judge:` naming an entry of the top-level judges:")
        if judge not in self.judges:
            known = sorted(self.judges) or "none defined"
            raise PolicyError(
                f"intent names judge {judge!r}, which judges: does not define ({known})"
            )
        actions: dict[str, IntentAction] = {}
        for key in ("on_mismatch", "on_unclear", "on_error"):
            action = value.get(key, "require_approval")
            if action not in INTENT_ACTIONS:
                raise PolicyError(f"intent.{key} is one of {list(INTENT_ACTIONS)}, got {action!r}")
            actions[key] = action
        if actions["on_error"] == "keep":
            raise PolicyError(
                "intent.on_error cannot be `keep`: a judge that fails must not be read as "
                "approval; use require_approval (the default) or deny"
            )
        return IntentSpec(judge, **actions)

    def _notify(self, value: object, loc: Loc) -> tuple[str, ...]:
        items = _string_list(value, "notify", "[slack, email]", empty_ok=True)
        bad = [v for v in items if v not in CHANNELS]
        if bad:
            raise PolicyError(f"unknown channel(s) {bad}; choose from {list(CHANNELS)}")
        # A file with a channels: section names there what it sends through (a file without
        # one may pass its channels to Gate(channels=...)); `web`, the inbox, lists everything.
        silent = [v for v in items if v != "web" and v not in self.channels]
        if self.channels and silent:
            self.problems.warn(
                loc,
                f"notify names {silent}, which the channels: section does not configure; "
                "nothing is sent there unless Gate(channels=...) adds it",
            )
        return tuple(dict.fromkeys(items))

    def approvers(self, value: object, loc: Loc, *, escalation: bool) -> Approvers:
        """Parse ``{roles, users, quorum}`` or ``{any: true}``, or a chain (``{stages: [...]}``
        / ``{all_of: [...]}``); warn about unknown names."""
        if not escalation and isinstance(value, Mapping) and CHAIN_KEYS & set(value):
            return self._chain(value, loc)
        keys = ("roles", "users") if escalation else ("roles", "users", "quorum", "any")
        example = "{roles: [...]}" if escalation else "{roles: [...], users: [...], quorum: N}"
        if not isinstance(value, Mapping):
            raise PolicyError(f"needs a mapping like {example}")
        unknown = sorted(str(k) for k in value if k not in keys)
        if unknown:
            raise PolicyError(f"unknown key(s) {unknown}; allowed: {list(keys)}")
        quorum = value.get("quorum", 1)
        if isinstance(quorum, bool) or not isinstance(quorum, int) or quorum < 1:
            raise PolicyError(f"quorum needs an integer >= 1, got {quorum!r}")
        roles = tuple(
            dict.fromkeys(_string_list(value.get("roles", []), "roles", "[finance]", empty_ok=True))
        )
        users = tuple(
            dict.fromkeys(_string_list(value.get("users", []), "users", "[alice]", empty_ok=True))
        )
        any_ = value.get("any", False)
        if not isinstance(any_, bool):
            raise PolicyError(f"any needs true or false, got {any_!r}")
        if any_ and (roles or users):
            raise PolicyError("any: true admits every person; remove roles/users or remove any")
        if any_:
            return Approvers(any=True, quorum=quorum)
        if not roles and not users:
            raise PolicyError(f"name who approves: {example}, or {{any: true}}")
        if not roles and quorum > len(users):
            raise PolicyError(
                f"quorum {quorum} cannot be met by {len(users)} listed user(s); "
                "lower quorum, add users or add roles"
            )
        self._check_directory(roles, users, quorum, loc)
        return Approvers(roles=roles, users=users, quorum=quorum)

    def _chain(self, value: Mapping[Any, Any], loc: Loc) -> Approvers:
        """``{stages: [group, ...], distinct}`` or ``{all_of: [group, ...], distinct}``; a group
        is ``{roles, users, quorum}``, a stage may add ``timeout``, ``on_timeout``,
        ``escalate_to``, ``escalate_after``. A problem in a group is reported at its path."""
        kinds = [k for k in ("stages", "all_of") if k in value]
        if len(kinds) > 1:
            raise PolicyError("use stages (one after the other) or all_of (at once), not both")
        kind = kinds[0]
        unknown = sorted(str(k) for k in value if k not in (kind, "distinct"))
        if unknown:
            raise PolicyError(
                f"unknown key(s) {unknown} beside {kind}; allowed: [{kind}, distinct] (put "
                f"roles, users and quorum inside each group of {kind})"
            )
        distinct = value.get("distinct", True)
        if not isinstance(distinct, bool):
            raise PolicyError(f"distinct needs true or false, got {distinct!r}")
        items = value[kind]
        if not isinstance(items, list) or not items:
            raise PolicyError(
                f"{kind} is a non-empty list of groups like [{{roles: [manager]}}, "
                "{roles: [finance], quorum: 2}]"
            )
        here = loc.key(kind)
        groups = tuple(
            self._group(g, here.item(i), staged=kind == "stages") for i, g in enumerate(items)
        )
        # a group's problem is already reported at its own path (the load fails on it)
        found = tuple(g for g in groups if g is not None)
        self._check_chain_directory(found, distinct, loc)
        total = sum(g.quorum for g in found)
        if kind == "stages":
            return Approvers(stages=found, distinct=distinct, quorum=total)
        return Approvers(all_of=found, distinct=distinct, quorum=total)

    def _group(self, value: object, loc: Loc, *, staged: bool) -> Approvers | None:
        """One group of a chain (problems are reported at ``loc``; None then)."""
        try:
            if not isinstance(value, Mapping):
                raise PolicyError("a group is a mapping like {roles: [finance], quorum: 2}")
            own = STAGE_KEYS if staged else ()
            if not staged and any(k in value for k in STAGE_KEYS):
                raise PolicyError(
                    f"{[k for k in STAGE_KEYS if k in value]} only apply to stages (all_of "
                    "groups are asked at once and share the review's deadline)"
                )
            if CHAIN_KEYS & set(value):
                raise PolicyError("a group of a chain cannot itself be a chain")
            allowed = ("roles", "users", "quorum", "any", *own)
            unknown = sorted(str(k) for k in value if k not in allowed)
            if unknown:
                raise PolicyError(f"unknown key(s) {unknown}; allowed: {list(allowed)}")
            plain = {k: v for k, v in value.items() if k not in own}
            group = self.approvers(plain, loc, escalation=False)
        except PolicyError as exc:
            self.problems.add(loc, exc.message)
            return None
        return self._stage_settings(group, value, loc) if staged else group

    def _stage_settings(
        self, group: Approvers, value: Mapping[Any, Any], loc: Loc
    ) -> Approvers | None:
        """A stage's own ``timeout``, ``on_timeout`` and escalation."""
        try:
            timeout = parse_duration(value["timeout"]) if "timeout" in value else None
            on_timeout = (
                self._on_timeout(value["on_timeout"], loc) if "on_timeout" in value else None
            )
            escalate_to = None
            after = None
            if on_timeout == "escalate":
                if "escalate_to" not in value:
                    raise PolicyError(
                        "on_timeout: escalate needs escalate_to: {roles: [...]} for this stage"
                    )
                escalate_to = self.approvers(
                    value["escalate_to"], loc.key("escalate_to"), escalation=True
                )
                if "escalate_after" in value:
                    after = parse_duration(value["escalate_after"])
            elif "escalate_to" in value or "escalate_after" in value:
                raise PolicyError(
                    "escalate_to and escalate_after of a stage need on_timeout: escalate on "
                    "the same stage"
                )
        except PolicyError as exc:
            self.problems.add(loc, exc.message)
            return None
        return replace(
            group,
            timeout_s=timeout,
            on_timeout=on_timeout,
            escalate_to=escalate_to,
            escalate_after_s=after,
        )

    def _check_chain_directory(
        self, groups: tuple[Approvers, ...], distinct: bool, loc: Loc
    ) -> None:
        """With ``distinct``, warn when ``people:`` has too few people for the whole chain."""
        if not self.people or not distinct:
            return
        eligible = {
            self.people.key(pid)
            for pid, p in self.people.items()
            if any(g.admits(pid, p.roles) for g in groups)
        } | {self.people.key(u) for g in groups for u in g.users}
        total = sum(g.quorum for g in groups)
        if total > len(eligible):
            self.problems.warn(
                loc,
                f"the chain needs {total} different people (distinct: true) but only "
                f"{len(eligible)} person(s) in people: can approve in it",
            )

    def _check_directory(
        self, roles: tuple[str, ...], users: tuple[str, ...], quorum: int, loc: Loc
    ) -> None:
        if not self.people:
            return
        for user in users:
            if user not in self.people:
                self.problems.warn(loc, f"user {user!r} is not in people:; they cannot be notified")
        for role in roles:
            if role not in self.held_roles:
                self.problems.warn(loc, f"no person in people: holds role {role!r}")
        eligible = {
            self.people.key(pid) for pid, p in self.people.items() if not p.roles.isdisjoint(roles)
        }
        eligible |= {self.people.key(u) for u in users}  # Bob and bob are one person
        if quorum > len(eligible):
            self.problems.warn(
                loc, f"quorum {quorum} but only {len(eligible)} person(s) can approve"
            )

    # ------------------------------------------------------------ resolving a chain
    def resolve(self, chain: list[Layer]) -> Resolved:
        """Merge ``chain`` (deepest first) over the built-in defaults and check the result.

        Allow and deny points resolve too (they use risk and description), so a mistake in a
        tool's review fields surfaces even when only its deny rules would reach it.
        """
        found: dict[str, tuple[Any, int]] = {}
        for depth, layer in enumerate(chain):
            for key, value in layer.values.items():
                found.setdefault(key, (value, depth))

        def get(key: str, default: Any) -> Any:
            return found[key][0] if key in found else default

        def origin(key: str) -> Loc:
            return chain[found[key][1]].origin(key) if key in found else chain[0].loc

        decisions = get("allowed_decisions", ("approve", "reject"))
        editable = get("editable_args", ())
        if "edit" in decisions and not editable:
            self.problems.add(
                origin("allowed_decisions"),
                "allowed_decisions has `edit` but no `editable_args`; list the arguments an "
                'approver may change, like [amount, memo], or "*"',
            )
        timeout = get("timeout", DEFAULT_TIMEOUT_S)
        on_timeout = get("on_timeout", "reject")
        escalate_to, escalate_after = self._escalation(found, chain, origin, timeout, on_timeout)
        approvers = get("approvers", ANY_APPROVER)
        if approvers.stages:
            self._check_stages(approvers, timeout, on_timeout, escalate_to, origin("approvers"))
        spec = ReviewSpec(
            allowed_decisions=decisions,
            approvers=approvers,
            editable_args=editable,
            forbid_self_approval=get("forbid_self_approval", True),
            allow_thread_approval=get("allow_thread_approval", True),
            risk=get("risk", None),
            timeout_s=timeout,
            on_timeout=on_timeout,
            escalate_to=escalate_to,
            escalate_after_s=escalate_after,
            description="",
            notify=get("notify", ()),
        )
        return Resolved(
            spec,
            get("description", self._default_description),
            spec.risk,
            "approvers" in found,
            get("intent", None),
        )

    def _check_stages(
        self,
        approvers: Approvers,
        timeout: float,
        on_timeout: str,
        escalate_to: Approvers | None,
        loc: Loc,
    ) -> None:
        """Each stage's deadline handling, its own or the review's, must make sense: never
        ``allow`` before the last stage (that would approve without the later stages), and an
        escalation strictly before the stage's deadline."""
        last = len(approvers.stages) - 1
        for i, stage in enumerate(approvers.stages):
            where = loc.key("stages").item(i)
            own = stage.on_timeout is not None
            stage_on_timeout = stage.on_timeout if own else on_timeout
            stage_timeout = stage.timeout_s if stage.timeout_s is not None else timeout
            if stage_on_timeout == "allow" and i < last:
                self.problems.add(
                    where,
                    f"on_timeout: allow at stage {i + 1} of {last + 1} would approve without "
                    "the later stages; use reject or escalate (allow only on the last stage)",
                )
            if stage_on_timeout == "escalate" and own:
                after = stage.escalate_after_s
                if after is not None and after >= stage_timeout:
                    self.problems.add(
                        where,
                        f"escalate_after ({format_duration(after)}) must be shorter than the "
                        f"stage's timeout ({format_duration(stage_timeout)})",
                    )

    def _escalation(
        self,
        found: dict[str, tuple[Any, int]],
        chain: list[Layer],
        origin: Any,
        timeout: float,
        on_timeout: str,
    ) -> tuple[Approvers | None, float | None]:
        if on_timeout != "escalate":
            on_depth = found["on_timeout"][1] if "on_timeout" in found else len(chain)
            for key in ("escalate_to", "escalate_after"):
                if key in found and found[key][1] < on_depth:
                    self.problems.add(origin(key), f"{key} only applies with on_timeout: escalate")
            return None, None
        if "escalate_to" not in found:
            self.problems.add(
                origin("on_timeout"),
                "on_timeout: escalate needs escalate_to: {roles: [...]} or {users: [...]}, "
                "who is asked when the first approvers do not answer",
            )
            return None, None
        after = found["escalate_after"][0] if "escalate_after" in found else timeout / 2
        if after >= timeout:
            self.problems.add(
                origin("escalate_after"),
                f"escalate_after ({format_duration(after)}) must be shorter than timeout "
                f"({format_duration(timeout)})",
            )
        return cast(Approvers, found["escalate_to"][0]), after


def _string_list(value: object, name: str, example: str, *, empty_ok: bool = False) -> list[str]:
    if (
        not isinstance(value, list | tuple)
        or not all(isinstance(v, str) and v for v in value)
        or (not value and not empty_ok)
    ):
        raise PolicyError(f"{name} is a list of names like {example}, got {value!r}")
    return list(value)


_PARSERS: dict[str, Any] = {
    "allowed_decisions": ReviewCompiler._allowed_decisions,
    "editable_args": ReviewCompiler._editable_args,
    "approvers": ReviewCompiler._approvers,
    "forbid_self_approval": ReviewCompiler._bool,
    "allow_thread_approval": ReviewCompiler._bool,
    "risk": ReviewCompiler._risk,
    "timeout": ReviewCompiler._duration,
    "on_timeout": ReviewCompiler._on_timeout,
    "escalate_to": ReviewCompiler._escalate_to,
    "escalate_after": ReviewCompiler._duration,
    "description": ReviewCompiler._description,
    "notify": ReviewCompiler._notify,
    "intent": ReviewCompiler._intent,
}
