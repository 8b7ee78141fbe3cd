"""Compile policy data (from YAML or a mapping) into the structures the engine walks.

One pass collects every problem it can, each with its YAML path and line, so a user fixes
a broken file in one round instead of one error per run. Structure is checked by hand rather
than with pydantic because the messages need the file's own paths and lines.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from signoff.model import RISK_LEVELS, Risk, VerdictKind
from signoff.policy.compiled import Outcome, Rule, ToolEntry
from signoff.policy.conditions import ALWAYS, CondCompiler
from signoff.policy.people import People, parse_people
from signoff.policy.redact import DEFAULT_REDACT_KEYS
from signoff.policy.regex import RegexError, compile_regex
from signoff.policy.review import (
    ANY_NOTE,
    APPROVAL_ONLY_KEYS,
    REVIEW_KEYS,
    Layer,
    Resolved,
    ReviewCompiler,
)
from signoff.policy.sections import RUNTIME_SECTIONS, TOP_KEYS
from signoff.policy.source import Loc, Problems, Source, bool_hint

RESERVED_SECTIONS = RUNTIME_SECTIONS  # the name older code used
DEFAULTS_KEYS = (
    "unknown_tool",
    "on_error",
    "require_approval_from_risk",
    *(k for k in REVIEW_KEYS if k != "risk"),
)
FALLBACK_KEYS = ("decision", "reason", *(k for k in REVIEW_KEYS if k != "risk"))
TOOL_KEYS = ("rules", "default", *REVIEW_KEYS)
DEFAULT_KEYS = ("decision", "reason", *REVIEW_KEYS)
RULE_KEYS = ("id", "when", "decision", "reason", "when_cel", *REVIEW_KEYS)
DECISIONS: tuple[VerdictKind, ...] = ("allow", "deny", "require_approval")
TIER = {"deny": 0, "require_approval": 1, "allow": 2}
STORE_SCHEMES = ("sqlite://", "memory://", "postgresql://", "postgres://")
_RESERVED_ID = re.compile(r"^(defaults\.|interrupt_on\.)|\.default$")
_GLOB_CHARS = frozenset("*?[")


@dataclass
class Compiled:
    """Everything the engine needs, built from one policy document."""

    exact: dict[str, ToolEntry] = field(default_factory=dict)
    globs: list[ToolEntry] = field(default_factory=list)
    unknown: Outcome | None = None
    unknown_floor: Outcome | None = None
    on_error: Outcome | None = None
    floor: Risk | None = None
    store_url: str = ""
    people: People = field(default_factory=People)
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    redact_keys: tuple[str, ...] = DEFAULT_REDACT_KEYS
    source: Source | None = None  # the line table, for errors found later (runtime sections)


def compile_policy(
    data: object, src: Source, base_dir: Path, policy_hash: str, *, internal_ids: bool = False
) -> Compiled:
    """Compile ``data``; raises PolicyError / PolicyErrors listing every problem found.

    ``internal_ids`` lets signoff's own translations (``interrupt_on.<tool>``) use rule ids
    that a file may not, so a file's rule can never pose as a built-in one.
    """
    problems = Problems()
    root = Loc(src)
    if data is None:
        problems.add(root, "the policy is empty; start it with `version: 1`")
        problems.raise_if_any()
    if not isinstance(data, Mapping):
        problems.add(root, f"a policy is a mapping with `version: 1` at the top, got {_kind(data)}")
        problems.raise_if_any()
    data = cast(Mapping[Any, Any], data)
    check_keys(data, (*TOP_KEYS, *RUNTIME_SECTIONS), root, problems, what="top-level key")
    _check_version(data, root, problems)
    people = parse_people(data.get("people"), root.key("people"), problems)
    out = Compiled(people=people, source=src)
    out.store_url = resolve_store(data.get("store"), base_dir, root.key("store"), problems)
    out.sections = _sections(data, root, problems)
    out.redact_keys = redact_keys(data, root, problems)
    judges = data.get("judges")
    judge_names = frozenset(str(k) for k in judges) if isinstance(judges, Mapping) else frozenset()
    channels = data.get("channels")
    channel_names = (
        frozenset(str(k) for k in channels) if isinstance(channels, Mapping) else frozenset()
    )
    builder = _Builder(
        problems,
        people,
        policy_hash,
        internal_ids=internal_ids,
        judges=judge_names,
        channels=channel_names,
    )
    builder.defaults(data.get("defaults"), root.key("defaults"), out)
    builder.tools(data.get("tools"), root.key("tools"), out)
    problems.raise_if_any()
    out.warnings = problems.warnings
    return out


def check_keys(
    data: Mapping[Any, Any],
    allowed: Sequence[str],
    loc: Loc,
    problems: Problems,
    *,
    what: str = "key",
) -> bool:
    """Report keys not in ``allowed`` (with a did-you-mean); True when all are known."""
    unknown = [k for k in data if k not in allowed]
    if not unknown:
        return True
    names = [str(k) for k in unknown]
    close = difflib.get_close_matches(names[0], list(allowed), n=1)
    hint = f" did you mean {close[0]!r}?" if close else ""
    problems.add(
        loc.key(unknown[0]),
        f"unknown {what}(s) {names};{hint} allowed: {sorted(allowed)}",
    )
    return False


def _check_version(data: Mapping[Any, Any], root: Loc, problems: Problems) -> None:
    if "version" not in data:
        problems.add(root, "missing `version: 1`; add it as the first line of the policy")
        return
    version = data["version"]
    if isinstance(version, bool) or version != 1:
        problems.add(
            root.key("version"),
            f"version must be 1 (the policy format this signoff reads), got {version!r}",
        )


def resolve_store(value: object, base_dir: Path, loc: Loc, problems: Problems) -> str:
    """The store URL with sqlite paths made absolute (relative ones are next to the file)."""
    if value is None:
        return "sqlite:///" + os.path.normpath(
            os.path.join(os.path.abspath(base_dir), "signoff.db")
        )
    hint = "use sqlite:///signoff.db, sqlite:////abs/path.db, memory:// or postgresql://..."
    if not isinstance(value, str) or not value.startswith(STORE_SCHEMES):
        problems.add(loc, f"store is a URL; {hint}; got {value!r}")
        return ""
    if value.startswith(("postgresql://", "postgres://")):
        userinfo = value.split("://", 1)[1].split("@", 1)
        if len(userinfo) == 2 and ":" in userinfo[0] and "${" not in userinfo[0]:
            problems.warn(loc, "the store URL has an inline password; use ${ENV_VAR} instead")
        return value
    if value.startswith("memory://"):
        return value
    if not value.startswith("sqlite:///"):
        problems.add(loc, f"a sqlite store URL has three slashes; {hint}; got {value!r}")
        return ""
    rest, sep, query = value[len("sqlite:///") :].partition("?")
    if not rest:
        problems.add(loc, f"the sqlite URL has no file path; {hint}")
        return ""
    if rest != ":memory:":
        rest = os.path.normpath(os.path.join(os.path.abspath(base_dir), rest))
    return f"sqlite:///{rest}{sep}{query}"


def _sections(data: Mapping[Any, Any], root: Loc, problems: Problems) -> dict[str, dict[str, Any]]:
    sections: dict[str, dict[str, Any]] = {}
    for name in RUNTIME_SECTIONS:
        value = data.get(name)
        if value is None:
            sections[name] = {}
        elif isinstance(value, Mapping):
            sections[name] = dict(value)
        else:
            problems.add(root.key(name), f"{name} is a mapping, got {_kind(value)}")
    return sections


def redact_keys(data: Mapping[Any, Any], root: Loc, problems: Problems) -> tuple[str, ...]:
    """The one list of secret-named argument patterns: top-level ``redact_keys``, or its
    older name ``ui.redact_keys``; the default list when neither is given."""
    top = data.get("redact_keys")
    ui = data.get("ui")
    alias = ui.get("redact_keys") if isinstance(ui, Mapping) else None
    if top is not None and alias is not None and top != alias:
        problems.add(
            root.key("redact_keys"),
            "redact_keys and ui.redact_keys (its older name) are both given and differ; "
            "keep the top-level redact_keys and remove ui.redact_keys",
        )
    if top is not None:
        return _patterns(top, root.key("redact_keys"), problems)
    if alias is not None:
        return _patterns(alias, root.key("ui").key("redact_keys"), problems)
    return DEFAULT_REDACT_KEYS


def _patterns(value: object, loc: Loc, problems: Problems) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        problems.add(
            loc,
            "a list of regular expressions for secret argument names, e.g. "
            f"['pass(word)?', token, 'api[_-]?key'], got {_kind(value)}",
        )
        return DEFAULT_REDACT_KEYS
    for i, pattern in enumerate(value):
        try:
            compile_regex(pattern, ignore_case=True)
        except RegexError as exc:
            problems.add(loc.item(i), str(exc))
    return tuple(value)


def _kind(value: object) -> str:
    return "nothing" if value is None else type(value).__name__


class _Builder:
    """Builds defaults, tools and rules; owns the cross-cutting state (rule ids, layers)."""

    def __init__(
        self,
        problems: Problems,
        people: People,
        policy_hash: str,
        *,
        internal_ids: bool = False,
        judges: frozenset[str] = frozenset(),
        channels: frozenset[str] = frozenset(),
    ) -> None:
        self.problems = problems
        self.internal_ids = internal_ids
        self.reviews = ReviewCompiler(problems, people, judges, channels)
        self.conds = CondCompiler(problems, self.reviews.directory_roles)
        self.hash = policy_hash
        self.defaults_layer = Layer(Loc(Source("defaults")))
        self.unknown_layer: Layer | None = None
        self.unknown_kind: VerdictKind = "require_approval"
        self.unknown_reason: str | None = None
        self.rule_ids: dict[str, Loc] = {}

    # ---------------------------------------------------------------- defaults
    def defaults(self, data: object, loc: Loc, out: Compiled) -> None:
        data = self._mapping(data, loc, "defaults")
        check_keys(data, DEFAULTS_KEYS, loc, self.problems)
        self.defaults_layer = self.reviews.layer(data, loc)
        floor = data.get("require_approval_from_risk")
        if floor is not None and floor not in RISK_LEVELS:
            self.problems.add(
                loc.key("require_approval_from_risk"),
                f"must be one of {list(RISK_LEVELS)}, got {floor!r}",
            )
        elif floor is not None:
            out.floor = cast(Risk, floor)
        kind, reason, layer = self._fallback(data, "unknown_tool", loc)
        self.unknown_kind, self.unknown_reason, self.unknown_layer = kind, reason, layer
        chain = [layer, self.defaults_layer]
        reason = reason or _unknown_reason("this tool", kind)
        warn = layer.loc if "unknown_tool" in data else None
        out.unknown = self._outcome(kind, "defaults.unknown_tool", chain, reason, warn=warn)
        if out.floor is not None:
            out.unknown_floor = self._outcome(
                "require_approval", "defaults.risk", [self.defaults_layer], None, warn=None
            )
        kind, reason, layer = self._fallback(data, "on_error", loc)
        if kind == "allow":
            self.problems.add(
                loc.key("on_error"),
                "on_error can never be allow: a call the policy could not evaluate must not run; "
                "use require_approval or deny",
            )
            kind = "require_approval"
        chain = [layer, self.defaults_layer]
        warn = layer.loc if "on_error" in data else None
        out.on_error = self._outcome(kind, "defaults.on_error", chain, reason, warn=warn)

    def _fallback(
        self, defaults: Mapping[Any, Any], key: str, loc: Loc
    ) -> tuple[VerdictKind, str | None, Layer]:
        """``unknown_tool`` / ``on_error``: a bare decision or a mapping with review fields."""
        here = loc.key(key)
        value = defaults.get(key)
        if value is None:
            return "require_approval", None, Layer(here)
        if isinstance(value, str):
            value = {"decision": value}
        if not isinstance(value, Mapping):
            self.problems.add(here, "needs a decision (deny) or {decision: ..., approvers: ...}")
            return "require_approval", None, Layer(here)
        check_keys(value, FALLBACK_KEYS, here, self.problems)
        kind = self._decision(value.get("decision"), here.key("decision"), required=True)
        if kind is not None and not (key == "on_error" and kind == "allow"):
            self._approval_only(value, kind, here)  # (on_error: allow is reported by the caller)
        reason = self._reason(value, here)
        return kind or "require_approval", reason, self.reviews.layer(value, here)

    # ---------------------------------------------------------------- tools
    def tools(self, data: object, loc: Loc, out: Compiled) -> None:
        data = self._mapping(data, loc, "tools")
        for name, entry in data.items():
            here = loc.key(name)
            if not isinstance(name, str) or not name:
                self.problems.add(
                    here, f"a tool name is a non-empty string, got {name!r}; quote it"
                )
                continue
            compiled = self._tool(name, entry, here, out)
            if compiled is None:
                continue
            if compiled.is_glob:
                out.globs.append(compiled)
            else:
                out.exact[name] = compiled

    def _tool(self, name: str, data: object, loc: Loc, out: Compiled) -> ToolEntry | None:
        if not isinstance(data, Mapping):
            self.problems.add(
                loc,
                f"a tool entry is a mapping, like {name}: {{default: allow}}; got {_kind(data)}",
            )
            return None
        check_keys(data, TOOL_KEYS, loc, self.problems)
        layer = self.reviews.layer(data, loc)
        tool_chain = [layer, self.defaults_layer]
        self.conds.rate_windows = []
        rules = self._rules(data.get("rules"), loc.key("rules"), tool_chain)
        default = self._tool_default(name, data, loc, layer)
        floor = None
        if out.floor is not None:
            floor = self._outcome("require_approval", "defaults.risk", tool_chain, None, warn=None)
        return ToolEntry(
            key=name,
            is_glob=not _GLOB_CHARS.isdisjoint(name),
            rules=tuple(sorted(rules, key=lambda r: TIER[r.decision])),
            default=default,
            floor=floor,
            risk=layer.values.get("risk"),
            rate_windows=tuple(dict.fromkeys(self.conds.rate_windows)),
            path=loc.text,
            line=loc.line,
        )

    def _tool_default(self, name: str, data: Mapping[Any, Any], loc: Loc, layer: Layer) -> Outcome:
        here = loc.key("default")
        value = data.get("default")
        if value is None:
            # No default: the unknown_tool decision, with this tool's review fields first.
            chain = [layer, self.unknown_layer or Layer(here), self.defaults_layer]
            reason = self.unknown_reason or _unknown_reason(name, self.unknown_kind)
            return self._outcome(self.unknown_kind, "defaults.unknown_tool", chain, reason, None)
        if isinstance(value, str):
            value = {"decision": value}
        if not isinstance(value, Mapping):
            self.problems.add(
                here, "default is a decision (allow) or {decision: deny, reason: ...}"
            )
            value = {"decision": "require_approval"}
        check_keys(value, DEFAULT_KEYS, here, self.problems)
        kind = self._decision(value.get("decision"), here.key("decision"), required=True)
        kind = kind or "require_approval"
        self._approval_only(value, kind, here)
        reason = self._reason(value, here) or (
            f"{name} is denied by policy (tools.{name}.default)" if kind == "deny" else None
        )
        chain = [self.reviews.layer(value, here), layer, self.defaults_layer]
        return self._outcome(kind, f"{name}.default", chain, reason, warn=here)

    def _rules(self, data: object, loc: Loc, tool_chain: list[Layer]) -> list[Rule]:
        if data is None:
            return []
        if not isinstance(data, list):
            self.problems.add(loc, "rules is a list of {id: ..., when: ..., decision: ...}")
            return []
        rules = [self._rule(item, loc.item(i), tool_chain) for i, item in enumerate(data)]
        return [r for r in rules if r is not None]

    def _rule(self, data: object, loc: Loc, tool_chain: list[Layer]) -> Rule | None:
        if not isinstance(data, Mapping):
            self.problems.add(loc, "a rule is a mapping with id, when and decision")
            return None
        check_keys(data, RULE_KEYS, loc, self.problems)
        rule_id = self._rule_id(data.get("id"), loc)
        if "when_cel" in data:
            self.problems.add(
                loc.key("when_cel"),
                "not supported in version 1 (reserved for the optional CEL extension); use when:",
            )
        kind = self._decision(data.get("decision"), loc.key("decision"), required=True)
        self.conds.rule_id = rule_id
        test = self.conds.when(data["when"], loc.key("when")) if "when" in data else ALWAYS
        reason = self._reason(data, loc)
        if kind == "deny" and "reason" not in data:
            self.problems.add(loc, "a deny rule needs `reason`, the message the agent is given")
        if kind is None or rule_id is None or test is None:
            return None
        self._approval_only(data, kind, loc)
        chain = [self.reviews.layer(data, loc), *tool_chain]
        outcome = self._outcome(kind, rule_id, chain, reason, warn=loc)
        return Rule(rule_id, kind, test, outcome, loc.text, loc.line)

    def _rule_id(self, value: object, loc: Loc) -> str | None:
        if value is None:
            self.problems.add(
                loc, "a rule needs an `id` (unique in the file), like id: large-transfer"
            )
            return None
        if not isinstance(value, str) or not value.strip():
            self.problems.add(
                loc.key("id"), f"a rule id is a non-empty string, got {value!r}{bool_hint(value)}"
            )
            return None
        if _RESERVED_ID.search(value) and not self.internal_ids:
            self.problems.add(
                loc.key("id"),
                f"rule id {value!r} looks like a built-in id (defaults.*, *.default, "
                "interrupt_on.*); choose another",
            )
        first = self.rule_ids.setdefault(value, loc)
        if first is not loc:
            where = f"{first.text}" + (f", line {first.line}" if first.line else "")
            self.problems.add(
                loc.key("id"),
                f"duplicate rule id {value!r} (first used at {where}); rule ids must be unique",
            )
        return value

    # ---------------------------------------------------------------- shared pieces
    def _outcome(
        self,
        kind: VerdictKind,
        rule_id: str,
        chain: list[Layer],
        reason: str | None,
        warn: Loc | None,
    ) -> Outcome:
        resolved: Resolved = self.reviews.resolve(chain)
        if kind == "require_approval" and warn is not None and not resolved.approvers_given:
            self.problems.warn(
                warn, f"{rule_id} requires approval but names no approvers; {ANY_NOTE}"
            )
        return Outcome(kind, rule_id, resolved, self.hash, reason=reason)

    def _decision(self, value: object, loc: Loc, *, required: bool) -> VerdictKind | None:
        if value is None and required:
            self.problems.add(loc, f"missing decision; choose one of {list(DECISIONS)}")
            return None
        if value not in DECISIONS:
            self.problems.add(loc, f"decision must be one of {list(DECISIONS)}, got {value!r}")
            return None
        return value

    def _reason(self, data: Mapping[Any, Any], loc: Loc) -> str | None:
        reason = data.get("reason")
        if reason is not None and not isinstance(reason, str):
            self.problems.add(
                loc.key("reason"), f"reason is a string, got {reason!r}{bool_hint(reason)}"
            )
            return None
        return reason

    def _approval_only(self, data: Mapping[Any, Any], kind: VerdictKind, loc: Loc) -> None:
        if kind == "require_approval":
            return
        for key in APPROVAL_ONLY_KEYS:
            if key in data:
                self.problems.add(
                    loc.key(key), f"{key} only applies to require_approval, not to {kind}"
                )

    def _mapping(self, data: object, loc: Loc, name: str) -> Mapping[Any, Any]:
        if data is None:
            return {}
        if not isinstance(data, Mapping):
            self.problems.add(loc, f"{name} is a mapping, got {_kind(data)}")
            return {}
        return data


def _unknown_reason(name: str, kind: VerdictKind) -> str | None:
    if kind != "deny":
        return None
    return f"no rule or default for {name}; defaults.unknown_tool is deny"
