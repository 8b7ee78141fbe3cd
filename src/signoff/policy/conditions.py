"""``when:`` conditions compiled once into closures over a closed operator table.

Nothing in a policy is parsed as code: a condition is data (field → value, or field →
``{operator: operand}``), checked at load and turned into small functions. Evaluation is
type-strict on purpose: ``"50000"`` vs ``10000`` or ``"1"`` vs ``1`` is an evaluation error
(so ``on_error`` decides, never ``allow``) instead of a silent "does not match".
"""

from __future__ import annotations

import fnmatch
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from signoff.model import CallContext, ToolCall
from signoff.policy.fields import EvalError, FieldSyntaxError, Getter, Missing, compile_field, kind
from signoff.policy.rates import RateBy, RateCounter, compile_rate
from signoff.policy.regex import Regex, RegexError, ascii_classes, compile_regex, shown
from signoff.policy.source import LoadError, Loc, Problems
from signoff.policy.timewindow import TIME_KEYS, compile_time_window

Cond = Callable[[ToolCall, CallContext, RateCounter | None], bool]
Check = Callable[[Any, ToolCall, CallContext], bool]
DirectoryRoles = Mapping[str, frozenset[str]]

OPERATORS = (
    "eq", "ne", "gt", "gte", "lt", "lte", "in", "not_in", "contains", "first_word_in",
    "starts_with", "ends_with", "glob", "matches", "not_matches", "exists", "eq_field",
    "ne_field", "hours_between", "weekday_in", "tz",
)  # fmt: skip
COMBINATORS = ("any", "all", "not")
ROLES_OPERATORS = ("contains", "exists")
REGEX_OPERATORS = ("matches", "not_matches")
_SCALAR_KINDS = ("str", "number", "bool")


class OperandError(ValueError):
    """An operand the operator cannot use (load time)."""


@dataclass
class CondCompiler:
    """Compiles ``when`` trees, reporting every problem to ``problems``."""

    problems: Problems
    directory_roles: Mapping[str, frozenset[str]]
    rate_windows: list[tuple[RateBy, float]] = field(default_factory=list)
    rule_id: str | None = None  # the rule being compiled, named in regex errors

    def when(self, data: object, loc: Loc) -> Cond | None:
        """The condition for a ``when`` mapping, or None if it had errors (already reported)."""
        if not isinstance(data, Mapping):
            self.problems.add(loc, "a condition is a mapping of field: value or field: {op: x}")
            return None
        conds: list[Cond] = []
        ok = True
        for key, value in data.items():
            cond = self._entry(key, value, loc.key(key))
            ok = ok and cond is not None
            if cond is not None:
                conds.append(cond)
        return _all_of(conds) if ok else None

    def _entry(self, key: object, value: object, loc: Loc) -> Cond | None:
        if key in ("any", "all"):
            return self._list(str(key), value, loc)
        if key == "not":
            inner = self.when(value, loc)
            return None if inner is None else _not(inner)
        if key == "rate":
            try:
                cond, by, window = compile_rate(value, loc)
            except LoadError as exc:
                self.problems.add_error(exc)
                return None
            self.rate_windows.append((by, window))
            return cond
        if not isinstance(key, str):
            self.problems.add(loc, f"a field name is text like args.amount, got {key!r}")
            return None
        try:
            get = compile_field(key, self.directory_roles)
        except FieldSyntaxError as exc:
            self.problems.add(loc, f"{exc}; or a combinator: any, all, not, or rate")
            return None
        name = key
        if isinstance(value, Mapping):
            return self._operators(name, get, value, loc)
        if isinstance(value, list | tuple):
            self.problems.add(loc, "a list is not a value to compare with; use {in: [...]}")
            return None
        return self._operators(name, get, {"eq": value}, loc)

    def _list(self, name: str, value: object, loc: Loc) -> Cond | None:
        if not isinstance(value, list | tuple) or not value:
            self.problems.add(loc, f"{name} needs a non-empty list of conditions")
            return None
        conds = [self.when(item, loc.item(i)) for i, item in enumerate(value)]
        if any(c is None for c in conds):
            return None
        done = [c for c in conds if c is not None]
        return _any_of(done) if name == "any" else _all_of(done)

    def _operators(self, name: str, get: Getter, ops: Mapping[Any, Any], loc: Loc) -> Cond | None:
        if not ops:
            self.problems.add(loc, f"no operator given; known: {', '.join(OPERATORS)}")
            return None
        unknown = [op for op in ops if op not in OPERATORS]
        if unknown:
            self.problems.add(
                loc, f"unknown operator {unknown[0]!r}; known: {', '.join(OPERATORS)}"
            )
            return None
        if name == "principal.roles" and any(op not in ROLES_OPERATORS for op in ops):
            self.problems.add(
                loc, "principal.roles is a set of role names; test it with contains: ROLE"
            )
            return None
        checks: list[Check] = []
        ok = True
        # hours_between / weekday_in / tz compile as one check, at the first of them.
        first_time_key = next((op for op in ops if op in TIME_KEYS), None)
        for op, operand in ops.items():
            if op == "exists" or (op in TIME_KEYS and op != first_time_key):
                continue
            try:
                if op in TIME_KEYS:
                    checks.append(compile_time_window(name, ops, loc))
                else:
                    checks.append(_BUILDERS[op](name, operand, self.directory_roles))
            except LoadError as exc:
                self.problems.add_error(exc)
                ok = False
            except (OperandError, FieldSyntaxError) as exc:
                self.problems.add(loc.key(op), self._in_rule(str(exc), op))
                ok = False
            else:
                if op in REGEX_OPERATORS:
                    self._warn_ascii(operand, loc.key(op))
        exists = ops.get("exists")
        if "exists" in ops and not isinstance(exists, bool):
            self.problems.add(loc.key("exists"), f"exists needs true or false, got {exists!r}")
            return None
        return _field_cond(get, checks, exists) if ok else None

    def _in_rule(self, message: str, op: str) -> str:
        if op not in REGEX_OPERATORS or self.rule_id is None:
            return message
        return f"rule {self.rule_id!r}: {message}"

    def _warn_ascii(self, pattern: str, loc: Loc) -> None:
        classes = ascii_classes(pattern)
        if classes:
            message = (
                f"{', '.join(classes)} in {shown(pattern)} match ASCII only (RE2; Python's re "
                "matched Unicode letters and digits too); write the set you mean, "
                r"e.g. [A-Za-z0-9_] or [\p{L}\p{N}_] (docs/policy.md, Regular expressions)"
            )
            self.problems.warn(loc, self._in_rule(message, "matches"))
        counts = [int(m) for m in _COUNT.findall(pattern) if m]
        if counts and max(counts) >= LARGE_COUNT:
            message = (
                f"a repetition count of {max(counts)} in {shown(pattern)}: on crafted text RE2 "
                "falls back to a slower (still linear) matcher, up to about a second per 256 KiB "
                "argument for counts near 1000 (docs/benchmarks.md); prefer small counts"
            )
            self.problems.warn(loc, self._in_rule(message, "matches"))


#: Counted repetitions at least this large get a load-time warning (RE2 DFA budget).
LARGE_COUNT = 100
_COUNT = re.compile(r"(?<!\\)\{(?:\d*,)?(\d+)\}")


# ---------------------------------------------------------------- combinators


def _always(call: ToolCall, ctx: CallContext, rates: RateCounter | None) -> bool:
    return True


ALWAYS: Cond = _always  # a rule without `when` matches every call


def _all_of(conds: list[Cond]) -> Cond:
    if not conds:
        return _always
    if len(conds) == 1:
        return conds[0]
    items = tuple(conds)

    def all_of(call: ToolCall, ctx: CallContext, rates: RateCounter | None) -> bool:
        for cond in items:  # noqa: SIM110 - a plain loop is faster than all(<genexpr>)
            if not cond(call, ctx, rates):
                return False
        return True

    return all_of


def _any_of(conds: list[Cond]) -> Cond:
    if len(conds) == 1:
        return conds[0]
    items = tuple(conds)

    def any_of(call: ToolCall, ctx: CallContext, rates: RateCounter | None) -> bool:
        for cond in items:  # noqa: SIM110 - a plain loop is faster than any(<genexpr>)
            if cond(call, ctx, rates):
                return True
        return False

    return any_of


def _not(inner: Cond) -> Cond:
    # An error inside `not` stays an error: negating "could not tell" must not become "yes".
    def not_(call: ToolCall, ctx: CallContext, rates: RateCounter | None) -> bool:
        return not inner(call, ctx, rates)

    return not_


def _field_cond(get: Getter, checks: list[Check], exists: bool | None) -> Cond:
    """Read the field once, then run its checks in order; ``exists`` decides when absent."""
    if exists is None and len(checks) == 1:
        check = checks[0]

        def one(call: ToolCall, ctx: CallContext, rates: RateCounter | None) -> bool:
            return check(get(call, ctx), call, ctx)

        return one
    items = tuple(checks)

    def several(call: ToolCall, ctx: CallContext, rates: RateCounter | None) -> bool:
        try:
            value = get(call, ctx)
        except Missing:
            if exists is None:
                raise
            return not exists
        if exists is False:
            return False
        for check in items:  # noqa: SIM110 - a plain loop is faster than all(<genexpr>)
            if not check(value, call, ctx):
                return False
        return True

    return several


# ---------------------------------------------------------------- operators


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


_KIND_TEST: dict[str, Callable[[object], bool]] = {
    "str": _is_str,
    "number": _is_number,
    "bool": _is_bool,
}


def _mismatch(name: str, value: object, expected: str) -> EvalError:
    return EvalError(
        f"type mismatch: {name} is {kind(value)}, the rule compares it with {expected}"
    )


def _scalar(op: str, operand: object, *, null: bool = False) -> str:
    """The kind of a scalar operand; raises OperandError for anything else."""
    k = kind(operand)
    if k in _SCALAR_KINDS or (null and k == "null"):
        return k
    extra = " (for several values use in: [...])" if k == "list" else ""
    nulls = ", boolean or null" if null else " or boolean"
    if k == "datetime" or type(operand).__name__ == "date":
        extra = " (quote dates and times)"
    raise OperandError(f"{op} needs a string, number{nulls}; got {k}{extra}")


def _strings(op: str, operand: object, *, single: bool = True) -> tuple[str, ...]:
    """A string, or a non-empty list of strings, as a tuple."""
    if isinstance(operand, str) and single:
        return (operand,)
    if isinstance(operand, list | tuple) and operand and all(isinstance(x, str) for x in operand):
        return tuple(operand)
    wanted = "a string or a non-empty list of strings" if single else "a non-empty list of strings"
    raise OperandError(f"{op} needs {wanted}, got {operand!r}")


def _build_eq(name: str, operand: object, _: object, *, negate: bool = False) -> Check:
    op = "ne" if negate else "eq"
    k = _scalar(op, operand, null=True)
    if k == "null":

        def is_null(value: Any, call: ToolCall, ctx: CallContext) -> bool:
            return (value is None) != negate

        return is_null
    test = _KIND_TEST[k]
    shown = f"a {k}" if k != "str" else "a string"

    def equals(value: Any, call: ToolCall, ctx: CallContext) -> bool:
        if test(value):
            return bool(value == operand) != negate
        raise _mismatch(name, value, shown)

    return equals


def _build_ne(name: str, operand: object, roles: object) -> Check:
    return _build_eq(name, operand, roles, negate=True)


_ORDER: dict[str, Callable[[Any, Any], Any]] = {
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}


def _build_order(op: str) -> Callable[[str, object, object], Check]:
    compare = _ORDER[op]

    def build(name: str, operand: object, _: object) -> Check:
        k = kind(operand)
        if k not in ("number", "str"):
            raise OperandError(f"{op} needs a number or a string, got {operand!r}")
        test = _KIND_TEST[k]

        def ordered(value: Any, call: ToolCall, ctx: CallContext) -> bool:
            if test(value):
                return bool(compare(value, operand))
            raise _mismatch(name, value, f"a {k}")

        return ordered

    return build


def _build_in(name: str, operand: object, _: object, *, negate: bool = False) -> Check:
    op = "not_in" if negate else "in"
    if not isinstance(operand, list | tuple) or not operand:
        raise OperandError(f"{op} needs a non-empty list of values, got {operand!r}")
    by_kind: dict[str, set[object]] = {}
    for item in operand:
        by_kind.setdefault(_scalar(op, item), set()).add(item)
    sets = {k: frozenset(v) for k, v in by_kind.items()}
    kinds = " or ".join(sorted(sets))

    def member(value: Any, call: ToolCall, ctx: CallContext) -> bool:
        values = sets.get(kind(value))
        if values is None:
            raise _mismatch(name, value, f"a list of {kinds}")
        return (value in values) != negate

    return member


def _build_not_in(name: str, operand: object, roles: object) -> Check:
    return _build_in(name, operand, roles, negate=True)


def _build_contains(name: str, operand: object, _: object) -> Check:
    k = _scalar("contains", operand)
    test = _KIND_TEST[k]

    def contains(value: Any, call: ToolCall, ctx: CallContext) -> bool:
        if isinstance(value, str):
            if k != "str":
                raise _mismatch(name, value, f"a {k}")
            return operand in value  # type: ignore[operator]
        if isinstance(value, Mapping):
            return operand in value
        if isinstance(value, list | tuple | set | frozenset):
            return any(test(item) and item == operand for item in value)
        raise _mismatch(name, value, "text, a list or a mapping (contains)")

    return contains


def _text_check(op: str, name: str, predicate: Callable[[str], bool]) -> Check:
    def check(value: Any, call: ToolCall, ctx: CallContext) -> bool:
        if isinstance(value, str):
            return predicate(value)
        raise _mismatch(name, value, f"text ({op})")

    return check


def _build_first_word_in(name: str, operand: object, _: object) -> Check:
    words = frozenset(_strings("first_word_in", operand, single=False))

    def first_word(value: str) -> bool:
        parts = value.split(None, 1)
        return bool(parts) and parts[0] in words

    return _text_check("first_word_in", name, first_word)


def _build_starts_with(name: str, operand: object, _: object) -> Check:
    prefixes = _strings("starts_with", operand)
    return _text_check("starts_with", name, lambda v: v.startswith(prefixes))


def _build_ends_with(name: str, operand: object, _: object) -> Check:
    suffixes = _strings("ends_with", operand)
    return _text_check("ends_with", name, lambda v: v.endswith(suffixes))


def _build_glob(name: str, operand: object, _: object) -> Check:
    patterns = _strings("glob", operand)
    rx = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))
    return _text_check("glob", name, lambda v: rx.match(v) is not None)


def _regex(op: str, operand: object) -> Regex:
    if not isinstance(operand, str):
        raise OperandError(f"{op} needs a regular expression string, got {operand!r}")
    try:
        return compile_regex(operand)
    except RegexError as exc:
        raise OperandError(str(exc)) from None


def _build_matches(name: str, operand: object, _: object) -> Check:
    search = _regex("matches", operand).search
    return _text_check("matches", name, search)


def _build_not_matches(name: str, operand: object, _: object) -> Check:
    search = _regex("not_matches", operand).search
    return _text_check("not_matches", name, lambda v: not search(v))


def _build_eq_field(
    name: str, operand: object, roles: DirectoryRoles, *, negate: bool = False
) -> Check:
    op = "ne_field" if negate else "eq_field"
    if not isinstance(operand, str):
        raise OperandError(f"{op} needs the name of another field, like context.environment")
    other = compile_field(operand, roles)

    def same_as_field(value: Any, call: ToolCall, ctx: CallContext) -> bool:
        theirs = other(call, ctx)
        if kind(value) != kind(theirs):
            raise EvalError(f"type mismatch: {name} is {kind(value)}, {operand} is {kind(theirs)}")
        return bool(value == theirs) != negate

    return same_as_field


def _build_ne_field(name: str, operand: object, roles: DirectoryRoles) -> Check:
    return _build_eq_field(name, operand, roles, negate=True)


_BUILDERS: dict[str, Callable[[str, object, DirectoryRoles], Check]] = {
    "eq": _build_eq,
    "ne": _build_ne,
    "gt": _build_order("gt"),
    "gte": _build_order("gte"),
    "lt": _build_order("lt"),
    "lte": _build_order("lte"),
    "in": _build_in,
    "not_in": _build_not_in,
    "contains": _build_contains,
    "first_word_in": _build_first_word_in,
    "starts_with": _build_starts_with,
    "ends_with": _build_ends_with,
    "glob": _build_glob,
    "matches": _build_matches,
    "not_matches": _build_not_matches,
    "eq_field": _build_eq_field,
    "ne_field": _build_ne_field,
}
