"""``Policy``: load a policy once, then decide allow / deny / require_approval per call.

``evaluate`` is the hot path (a few microseconds): it looks the tool up (exact name, then the
first matching glob, memoised), walks the pre-sorted rules, and stamps a pre-built outcome.
It never raises: anything unexpected becomes the ``defaults.on_error`` verdict (fail closed).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from signoff.model import (
    CallContext,
    PolicyError,
    Principal,
    ReviewSpec,
    Risk,
    ToolCall,
    Verdict,
)
from signoff.model.identity import same_person
from signoff.policy.compiled import RISK_RANK, Outcome, ToolEntry, higher_risk
from signoff.policy.explain import Explanation, Lookup, RuleStep
from signoff.policy.fields import EvalError
from signoff.policy.interrupt_on import translate_interrupt_on
from signoff.policy.loader import Compiled, compile_policy
from signoff.policy.people import People
from signoff.policy.rates import RateBy, RateCounter
from signoff.policy.redact import SecretKeys
from signoff.policy.source import Source, parse_yaml, with_line

#: Verdicts carry this many hex characters of ``Policy.hash`` (64 bits: enough to tell
#: policy versions apart in the audit, short enough to read).
SHORT_HASH = 16
_CACHE_LIMIT = 4096


class Policy:
    """A compiled ``signoff.yaml``. Build one with :meth:`load`, :meth:`from_yaml`,
    :meth:`from_mapping` or :meth:`from_interrupt_on`; it is immutable and thread-safe."""

    path: Path | None
    hash: str
    store_url: str
    people: People
    sections: dict[str, dict[str, Any]]
    redact_keys: tuple[str, ...]
    secret_keys: SecretKeys
    warnings: list[str]
    interrupt_on_extras: dict[str, dict[str, Any]]

    def __init__(
        self,
        compiled: Compiled,
        *,
        policy_hash: str,
        path: Path | None = None,
        interrupt_on_extras: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """Internal: use the ``load`` / ``from_*`` constructors."""
        assert compiled.unknown is not None and compiled.on_error is not None
        self.path = path
        self.hash = policy_hash
        self.store_url = compiled.store_url
        self.people = compiled.people
        self.sections = compiled.sections
        self.redact_keys = compiled.redact_keys  # secret argument names (policy/redact.py)
        self.secret_keys = SecretKeys(compiled.redact_keys)
        self.warnings = compiled.warnings
        self.source = compiled.source
        self.interrupt_on_extras = interrupt_on_extras or {}
        self._exact = compiled.exact
        self._globs = tuple(compiled.globs)
        self._unknown: Outcome = compiled.unknown
        self._unknown_floor = compiled.unknown_floor
        self._on_error: Outcome = compiled.on_error
        self._floor = compiled.floor
        self._floor_rank = RISK_RANK[compiled.floor] if compiled.floor else 99
        self._cache: dict[Any, tuple[ToolEntry | None, Lookup]] = {}

    def located(self, exc: PolicyError) -> PolicyError:
        """``exc`` (from a runtime section's owner, which sees plain mappings) with the line
        of the key it names in this policy's file, where the file has one."""
        return with_line(exc, self.source)

    @contextmanager
    def locating(self) -> Iterator[None]:
        """Re-raise a :class:`PolicyError` from the block with the line of its key."""
        try:
            yield
        except PolicyError as exc:
            found = self.located(exc)
            if found is exc:
                raise
            raise found from None

    # ---------------------------------------------------------------- constructors
    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Policy:
        """Load a policy file; relative sqlite store paths resolve next to it."""
        file = Path(path)
        try:
            raw = file.read_bytes()
        except OSError as exc:
            raise PolicyError(
                f"cannot read the policy file: {exc.strerror or exc}",
                path=str(file),
                file=str(file),
            ) from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PolicyError(
                f"the policy file is not UTF-8 text ({exc.reason} at byte {exc.start})",
                path=file.name,
                file=str(file),
            ) from None
        digest = hashlib.sha256(raw).hexdigest()
        return cls._from_text(text, file.name, file.resolve().parent, digest, file)

    @classmethod
    def from_yaml(
        cls, text: str, *, filename: str = "signoff.yaml", base_dir: Path | None = None
    ) -> Policy:
        """Compile YAML text; ``filename`` prefixes error paths, ``base_dir`` anchors the store."""
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return cls._from_text(text, filename, base_dir or Path.cwd(), digest, None)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, filename: str = "<mapping>") -> Policy:
        """Compile an already-parsed policy (no line numbers in errors)."""
        try:
            digest = canonical_hash(data)
        except RecursionError:
            raise PolicyError("the policy mapping refers to itself", path=filename) from None
        compiled = compile_policy(data, Source(filename), Path.cwd(), digest[:SHORT_HASH])
        return cls(compiled, policy_hash=digest)

    @classmethod
    def from_interrupt_on(cls, mapping: Mapping[str, bool | Mapping[str, Any]]) -> Policy:
        """LangChain's ``interrupt_on={tool: True | False | {allowed_decisions: ...}}``.

        True asks for approval with every decision type and any approver; a dict narrows the
        decisions (a missing or empty ``allowed_decisions`` is an error, never "allow");
        False or absent tools run without review.
        """
        data, extras = translate_interrupt_on(mapping)
        digest = canonical_hash(data)
        compiled = compile_policy(
            data, Source("interrupt_on"), Path("."), digest[:SHORT_HASH], internal_ids=True
        )
        return cls(compiled, policy_hash=digest, interrupt_on_extras=extras)

    @classmethod
    def _from_text(
        cls, text: str, filename: str, base_dir: Path, digest: str, path: Path | None
    ) -> Policy:
        data, src = parse_yaml(text, filename)
        compiled = compile_policy(data, src, base_dir, digest[:SHORT_HASH])
        return cls(compiled, policy_hash=digest, path=path)

    # ---------------------------------------------------------------- deciding
    def evaluate(
        self,
        call: ToolCall,
        ctx: CallContext,
        *,
        risk: Risk | None = None,
        rates: RateCounter | None = None,
    ) -> Verdict:
        """Decide one call. Never raises: errors become the ``defaults.on_error`` verdict.

        ``risk`` is the code-level risk (``@gate.guard(risk="high")``); the verdict carries
        the higher of it and the policy's. ``rates`` counts executed calls for ``rate:``
        conditions; without it such a condition is an evaluation error.
        """
        try:
            return self._decide(call, ctx, risk, rates, None)
        except Exception as exc:  # fail closed, whatever happened
            return self._failed(call, ctx, risk, None, None, exc)

    def explain(
        self,
        call: ToolCall,
        ctx: CallContext,
        *,
        risk: Risk | None = None,
        rates: RateCounter | None = None,
    ) -> Explanation:
        """The verdict plus a trace: the matched entry, every rule in order, the final rule."""
        trace = Explanation(tool=str(call.name))
        try:
            trace.verdict = self._decide(call, ctx, risk, rates, trace)
        except Exception as exc:
            trace.verdict = self._failed(call, ctx, risk, None, None, exc)
            trace.notes.append(f"evaluation failed: {trace.verdict.reason}")
        entry = self._entry_by_key(trace.entry, trace.lookup)
        if entry is not None:
            tried = len(trace.steps)
            for rule in entry.rules[tried:]:
                trace.steps.append(
                    RuleStep(
                        rule.id, rule.decision, "not evaluated", path=rule.path, line=rule.line
                    )
                )
        return trace

    def on_error(
        self, call: ToolCall, ctx: CallContext, reason: str, *, rule: str = "defaults.on_error"
    ) -> Verdict:
        """The ``defaults.on_error`` verdict with ``reason`` (e.g. when a validator raised)."""
        tool_risk = None
        try:
            entry = self._lookup(call.name)[0]
            tool_risk = entry.risk if entry is not None else None
        except Exception:
            pass
        return self._error_verdict(call, ctx, reason, rule, tool_risk, None)

    def _decide(
        self,
        call: ToolCall,
        ctx: CallContext,
        risk: Risk | None,
        rates: RateCounter | None,
        trace: Explanation | None,
    ) -> Verdict:
        if risk is not None and risk not in RISK_RANK:
            raise EvalError(f"unknown risk level {risk!r}; use low, medium, high or critical")
        entry, how = self._lookup(call.name)
        if trace is not None:
            _trace_lookup(trace, entry, how)
        if entry is None:
            return self._fallback(self._unknown, self._unknown_floor, None, call, ctx, risk, trace)
        for rule in entry.rules:
            try:
                hit = rule.test(call, ctx, rates)
            except Exception as exc:
                if trace is not None:
                    trace.steps.append(
                        RuleStep(
                            rule.id, rule.decision, "error", _message(exc), rule.path, rule.line
                        )
                    )
                return self._failed(call, ctx, risk, entry, rule.id, exc)
            if trace is not None:
                trace.steps.append(
                    RuleStep(
                        rule.id,
                        rule.decision,
                        "matched" if hit else "no match",
                        path=rule.path,
                        line=rule.line,
                    )
                )
            if hit:
                return rule.outcome.verdict(call, ctx, risk)
        return self._fallback(entry.default, entry.floor, entry.risk, call, ctx, risk, trace)

    def _fallback(
        self,
        outcome: Outcome,
        floor: Outcome | None,
        tool_risk: Risk | None,
        call: ToolCall,
        ctx: CallContext,
        code_risk: Risk | None,
        trace: Explanation | None,
    ) -> Verdict:
        """No rule decided: the default — unless a high enough risk turns an allow into review."""
        if outcome.kind == "allow" and floor is not None:
            effective = higher_risk(tool_risk, code_risk)
            if RISK_RANK[effective] >= self._floor_rank:
                reason = (
                    f"risk {effective} is at or above defaults.require_approval_from_risk "
                    f"({self._floor})"
                )
                if trace is not None:
                    trace.notes.append(f"{outcome.rule} would allow, but {reason}")
                return floor.verdict(call, ctx, effective, reason)
        if trace is not None:
            trace.notes.append(f"no rule matched; {outcome.rule} decides {outcome.kind}")
        return outcome.verdict(call, ctx, code_risk)

    def _failed(
        self,
        call: ToolCall,
        ctx: CallContext,
        code_risk: Risk | None,
        entry: ToolEntry | None,
        rule_id: str | None,
        exc: BaseException,
    ) -> Verdict:
        where = f" ({rule_id})" if rule_id else ""
        reason = f"policy could not be evaluated{where}: {_message(exc)}"
        tool_risk = entry.risk if entry is not None else None
        return self._error_verdict(call, ctx, reason, "defaults.on_error", tool_risk, code_risk)

    def _error_verdict(
        self,
        call: ToolCall,
        ctx: CallContext,
        reason: str,
        rule: str,
        tool_risk: Risk | None,
        code_risk: Risk | None,
    ) -> Verdict:
        """The on_error verdict; built defensively because it is the last line of defence."""
        on_error = self._on_error
        try:
            risk = higher_risk(tool_risk, code_risk if code_risk in RISK_RANK else None)
            return on_error.verdict(call, ctx, risk, reason, rule=rule, errors=(reason,))
        except Exception:
            review = None if on_error.kind == "deny" else ReviewSpec(description=reason)
            return Verdict(
                on_error.kind,
                rule,
                reason=reason,
                review=review,
                policy_hash=self.hash[:SHORT_HASH],
                description=reason,
                errors=(reason,),
            )

    def _lookup(self, name: Any) -> tuple[ToolEntry | None, Lookup]:
        cached = self._cache.get(name)
        if cached is not None:
            return cached
        found: tuple[ToolEntry | None, Lookup]
        entry = self._exact.get(name)
        if entry is not None:
            found = (entry, "exact")
        else:
            glob = next((g for g in self._globs if fnmatchcase(name, g.key)), None)
            found = (glob, "glob") if glob is not None else (None, "unknown")
        if len(self._cache) < _CACHE_LIMIT:
            self._cache[name] = found
        return found

    def _entry_by_key(self, key: str | None, how: Lookup) -> ToolEntry | None:
        if key is None:
            return None
        if how == "exact":
            return self._exact.get(key)
        return next((g for g in self._globs if g.key == key), None)

    # ---------------------------------------------------------------- directory & facts
    def roles_of(self, person_id: str) -> frozenset[str]:
        """The person's roles from ``people:`` (empty when not listed); ``person_id`` may be
        any spelling of their id or one of their aliases."""
        found = self.people.find(person_id)
        return found.roles if found is not None else frozenset()

    def principal(self, id: str, roles: Iterable[str] = ()) -> Principal:
        """A Principal whose roles come from ``people:`` when listed there (directory wins,
        also for another spelling or an alias); the id is kept as written."""
        found = self.people.find(id)
        return Principal(id, found.roles if found is not None else frozenset(roles))

    def knows(self, name: str) -> bool:
        """Whether ``name`` is a person in ``people:`` (by id or alias, any case or width)."""
        return name in self.people

    def person_key(self, name: str) -> str:
        """What ``name`` is compared as: the listed person's key for their id and every alias,
        else NFKC + casefold (:func:`signoff.model.identity.person_key`). Pass it as ``key``
        to the state machine (``apply_decisions``, ``may_decide``) so aliases count as the
        person for self-approval and quorum."""
        return self.people.key(name)

    def same_person(self, a: str | None, b: str | None) -> bool:
        """Whether two names are one person (aliases included)."""
        return same_person(a, b, self.people.key)

    def outcomes_for(self, tool: str, *, exact: bool = False) -> list[Outcome]:
        """Every outcome a call of ``tool`` can reach: its entry's rules, default and risk
        floor (or ``defaults.unknown_tool`` when no entry covers it), then ``on_error``. With
        ``exact``, only a ``tools:`` entry named exactly ``tool`` counts (empty otherwise)."""
        entry, how = self._lookup(tool)
        if exact and how != "exact":
            return []
        if entry is None:
            return [self._unknown, self._on_error]
        found = [rule.outcome for rule in entry.rules] + [entry.default]
        if entry.floor is not None:
            found.append(entry.floor)
        return [*found, self._on_error]

    def rate_windows(self, tool: str) -> list[tuple[RateBy, float]]:
        """``(by, window_s)`` for each ``rate:`` condition that governs ``tool``; the gate
        keeps counters only for these."""
        try:
            entry = self._lookup(tool)[0]
        except TypeError:
            return []
        return [] if entry is None else list(entry.rate_windows)

    @property
    def short_hash(self) -> str:
        """The prefix of :attr:`hash` that verdicts carry as ``policy_hash``."""
        return self.hash[:SHORT_HASH]

    @property
    def tool_keys(self) -> list[str]:
        """The ``tools:`` keys in file order within each kind (exact names, then globs)."""
        return [*self._exact, *(g.key for g in self._globs)]

    def summary(self) -> dict[str, Any]:
        """Counts and facts for ``signoff policy check``."""
        entries = [*self._exact.values(), *self._globs]
        return {
            "version": 1,
            "hash": self.hash,
            "short_hash": self.short_hash,
            "path": str(self.path) if self.path else None,
            "store": self.store_url,
            "tools": len(entries),
            "glob_tools": len(self._globs),
            "rules": sum(len(e.rules) for e in entries),
            "people": len(self.people),
            "roles": sorted({r for p in self.people.values() for r in p.roles}),
            "rate_limited_tools": [e.key for e in entries if e.rate_windows],
            "unknown_tool": self._unknown.kind,
            "on_error": self._on_error.kind,
            "require_approval_from_risk": self._floor,
            "warnings": len(self.warnings),
        }

    def __repr__(self) -> str:
        where = self.path.name if self.path else "<text>"
        return f"<Policy {where} {self.short_hash} tools={len(self.tool_keys)}>"


def _trace_lookup(trace: Explanation, entry: ToolEntry | None, how: Lookup) -> None:
    trace.lookup = how
    if entry is None:
        trace.notes.append("no tools: entry matches; defaults.unknown_tool applies")
        return
    trace.entry, trace.entry_path, trace.entry_line = entry.key, entry.path, entry.line
    if how == "glob":
        trace.notes.append(f"matched the glob {entry.key!r} (no exact entry)")


def _message(exc: BaseException) -> str:
    if isinstance(exc, EvalError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def canonical_hash(data: object) -> str:
    """sha256 of canonical JSON (sorted keys); callables and odd objects by type name."""
    text = json.dumps(_canonical(data), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _canonical(value: object) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Mapping):
        return {_key(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(json.dumps(_canonical(v), sort_keys=True) for v in value)
    if callable(value):
        return f"<callable {getattr(value, '__qualname__', type(value).__name__)}>"
    return f"<{type(value).__name__} {value}>"


def _key(key: object) -> str:
    return key if isinstance(key, str) else f"<{type(key).__name__}>{key!r}"
