"""User regular expressions, matched by RE2 in time linear in the text.

Patterns in a policy (``matches``, ``not_matches``) and in ``ui.redact_keys`` are written by
the operator but matched against text the agent controls. Python's backtracking ``re`` takes
exponential time on patterns like ``(a+)+$`` — one crafted argument would stall the server —
so they are compiled with RE2 (google-re2), which never backtracks.

Python's syntax is kept where RE2 can express it with the same meaning: ``$`` also matches
before a final newline (as in Python; RE2 has no lookahead, so it consumes that newline — only
a pattern that goes on matching after a ``$`` can tell), ``\\Z`` is the very end, ``{,n}`` is
``{0,n}``, ``\\s`` includes ``\\v``, ``[\\b]`` is a backspace, and ``\\uXXXX``,
``\\UXXXXXXXX`` and ``\\N{name}`` name characters.
What RE2 cannot do (backreferences, lookaround, atomic groups, possessive quantifiers,
verbose mode) is refused at load with a hint. ``\\w``, ``\\d`` and ``\\b`` are ASCII-only in
RE2 (Unicode in Python): :func:`ascii_classes` finds them so the loader warns. (``\\s`` is
Python's ASCII whitespace; only Unicode spaces such as U+00A0 differ, rare enough not to warn.)
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

# google-re2 ships no type stubs. The pybind11 core (``re2._re2``) is used directly rather than
# the ``re``-like wrapper: a boolean search then skips building match objects (0.6 µs instead
# of 1.5 µs per short string), and the core releases the GIL while it matches.
import re2  # type: ignore[import-untyped]

SYNTAX_URL = "https://github.com/google/re2/wiki/Syntax"
_UNANCHORED = re2._re2.RE2.Anchor.UNANCHORED
_ASCII_CLASSES = frozenset("wWdDbB")
_FLAG_CHARS = frozenset("imsuxaLU-")
_UPPER_ONLY = re.compile(r"\{,[0-9]*\}")  # {,n} and {,}
_SPACE = {  # Python's ASCII whitespace is \t \n \v \f \r and space: \t-\r plus " "
    ("s", False): r"[\t-\r ]",
    ("s", True): r"\t-\r ",
    ("S", False): r"[^\t-\r ]",
    ("S", True): r"\x00-\x08\x0e-\x1f!-\x{10ffff}",
}
_PYTHON_DOLLAR = r"(?:\n?\z)"  # Python's `$`: at the end, or before a newline that ends the text


class _Core(Protocol):
    """The part of ``re2._re2.RE2`` used here."""

    def ok(self) -> bool: ...
    def error(self) -> bytes: ...
    def Match(  # the C++ name
        self, anchor: object, text: bytes, pos: int, endpos: int
    ) -> list[tuple[int, int]]: ...


class RegexError(ValueError):
    """A pattern RE2 cannot compile; ``str()`` says why and what to write instead."""


@dataclass(frozen=True, slots=True, eq=False)
class Regex:
    """A compiled pattern. ``search(text)`` is True when it matches anywhere (``re.search``)."""

    pattern: str
    _core: _Core

    def search(self, text: str) -> bool:
        """True when the pattern matches somewhere in ``text``."""
        # surrogatepass: a lone surrogate (JSON allows "\ud800") is matched, not an exception.
        data = text.encode("utf-8", "surrogatepass")
        return self._core.Match(_UNANCHORED, data, 0, len(data))[0][0] >= 0

    def __deepcopy__(self, memo: dict[int, object]) -> Regex:
        return self  # immutable (and the RE2 object cannot be copied)


def compile_regex(pattern: str, *, ignore_case: bool = False) -> Regex:
    """Compile ``pattern`` (Python syntax, see the module docstring) with RE2.

    Raises :class:`RegexError` naming the problem and a rewrite when RE2 cannot take it.
    """
    options = re2.Options()
    options.log_errors = False  # errors are reported to the user, not written to stderr
    options.never_capture = True  # only "does it match?" is asked: the DFA alone answers
    options.case_sensitive = not ignore_case
    core: _Core = re2._re2.RE2(translate(pattern).encode("utf-8", "surrogatepass"), options)
    if not core.ok():
        reason = core.error().decode("utf-8", "replace")
        hint = _hint(pattern, reason)
        raise RegexError(f"bad regular expression {shown(pattern)} (RE2: {reason}); {hint}")
    return Regex(pattern, core)


def compile_any(patterns: Sequence[str], *, ignore_case: bool = False) -> Regex:
    """One pattern matching where any of ``patterns`` matches (each checked on its own first,
    so an error names the pattern at fault)."""
    for pattern in patterns:
        compile_regex(pattern, ignore_case=ignore_case)
    return compile_regex("|".join(f"(?:{p})" for p in patterns), ignore_case=ignore_case)


def ascii_classes(pattern: str) -> list[str]:
    """The classes in ``pattern`` that are ASCII-only in RE2, Unicode in Python (``\\w``, …)."""
    return list(_Scanner(pattern).run().ascii)


def shown(pattern: str) -> str:
    """``pattern`` quoted for a message, its backslashes not doubled (unlike ``repr``)."""
    return f"'{pattern}'" if pattern.isprintable() else repr(pattern)


def translate(pattern: str) -> str:
    """``pattern`` rewritten so RE2 gives it Python's meaning (see the module docstring)."""
    return _Scanner(pattern).run().text


def _hint(pattern: str, reason: str) -> str:
    backreference = "invalid escape sequence: \\" in reason and reason[-1:].isdigit()
    if backreference or ("(?P" in reason and "(?P=" in pattern):
        return (
            "RE2 has no backreferences (\\1, (?P=name)): a pattern cannot refer to what it "
            "matched; list the alternatives instead, or compare two fields with eq_field"
        )
    if any(op in reason for op in ("(?=", "(?!", "(?<=", "(?<!")):
        return (
            "RE2 has no lookahead or lookbehind; rewrite the pattern without it, e.g. as two "
            "conditions under all: (one matches, one not_matches)"
        )
    if "(?>" in reason or ("repetition operator" in reason and reason.endswith("+")):
        return (
            "RE2 has no atomic groups or possessive quantifiers and does not need them (it "
            "never backtracks); drop the (?> ) or the extra +"
        )
    if "(?x" in reason or "(?#" in reason:
        return "RE2 has no verbose mode or (?# ) comments; write the pattern on one line"
    if "invalid perl operator: (?" in reason:
        return f"RE2 knows the flags i, m, s and U, not Python's a, L, u or x; see {SYNTAX_URL}"
    if "repetition size" in reason:
        return "RE2 allows counts {n,m} up to 1000 in total"
    if "too large" in reason:
        return "the pattern is over RE2's size budget; split it into several conditions"
    return f"patterns use RE2 syntax: {SYNTAX_URL}"


@dataclass(slots=True)
class _Scanned:
    text: str
    ascii: dict[str, None]


class _Scanner:
    """One pass over a pattern, tracking character classes and the multiline flag per group."""

    def __init__(self, pattern: str) -> None:
        self.src = pattern
        self.i = 0
        self.out: list[str] = []
        self.ascii: dict[str, None] = {}
        self.multiline = False
        self.groups: list[bool] = []  # the multiline flag outside each open group

    def run(self) -> _Scanned:
        src = self.src
        while self.i < len(src):
            c = src[self.i]
            if c == "\\":
                self._escape(in_class=False)
            elif c == "[":
                self._char_class()
            elif c == "(":
                self._open_group()
            elif c == ")":
                self.multiline = self.groups.pop() if self.groups else self.multiline
                self._take(1)
            elif c == "$" and not self.multiline:
                self.out.append(_PYTHON_DOLLAR)
                self.i += 1
            elif c == "{" and _UPPER_ONLY.match(src, self.i):
                self.out.append("{0")  # Python's {,n} is {0,n}; RE2 would read it literally
                self.i += 1
            else:
                self._take(1)
        return _Scanned("".join(self.out), self.ascii)

    def _take(self, n: int) -> None:
        self.out.append(self.src[self.i : self.i + n])
        self.i += n

    def _escape(self, *, in_class: bool) -> None:
        c = self.src[self.i + 1 : self.i + 2]
        if c and c in _ASCII_CLASSES and not (in_class and c in "bB"):
            self.ascii["\\" + c] = None
        if c in ("s", "S"):
            self.out.append(_SPACE[c, in_class])  # Python's \s has \v (RE2's has not)
            self.i += 2
        elif in_class and c == "b":
            self.out.append(r"\x08")  # Python's [\b] is a backspace
            self.i += 2
        elif c == "Z" and not in_class:
            self.out.append(r"\z")  # Python's \Z is RE2's \z
            self.i += 2
        elif c == "Q" and not in_class:
            end = self.src.find("\\E", self.i + 2)
            self._take((len(self.src) if end < 0 else end + 2) - self.i)
        elif c in ("u", "U", "N"):
            self._named_char(c)
        else:
            self._take(2)

    def _named_char(self, c: str) -> None:
        digits = {"u": 4, "U": 8}.get(c)
        start = self.i + 2
        code: int | None = None
        if digits is not None:
            hexa = self.src[start : start + digits]
            if len(hexa) == digits and all(h in "0123456789abcdefABCDEF" for h in hexa):
                code, end = int(hexa, 16), start + digits
        elif self.src.startswith("{", start) and (close := self.src.find("}", start)) > 0:
            try:
                code, end = ord(unicodedata.lookup(self.src[start + 1 : close])), close + 1
            except KeyError:
                code = None
        if code is None or code > 0x10FFFF:
            self._take(2)  # RE2 reports the bad escape
            return
        self.out.append(f"\\x{{{code:x}}}")
        self.i = end

    def _char_class(self) -> None:
        src = self.src
        self._take(1)
        if src.startswith("^", self.i):
            self._take(1)
        if src.startswith("]", self.i):
            self._take(1)  # a ] first in a class is a literal ]
        while self.i < len(src) and src[self.i] != "]":
            if src[self.i] == "\\":
                self._escape(in_class=True)
            elif src.startswith("[:", self.i) and (end := src.find(":]", self.i + 2)) > 0:
                self._take(end + 2 - self.i)  # [:alpha:]
            else:
                self._take(1)
        self._take(1)

    def _open_group(self) -> None:
        src = self.src
        self.groups.append(self.multiline)
        if not src.startswith("(?", self.i):
            self._take(1)
            return
        j = self.i + 2
        while j < len(src) and src[j] in _FLAG_CHARS:
            j += 1
        if j < len(src) and src[j] in ":)" and j > self.i + 2:
            on, _, off = src[self.i + 2 : j].partition("-")
            multiline = ("m" in on or self.multiline) and "m" not in off
            if src[j] == ")":  # (?m): to the end of the enclosing group
                self.groups.pop()
                self.multiline = multiline
            else:  # (?m:...): inside this group only
                self.multiline = multiline
            self._take(j + 1 - self.i)
            return
        self._take(2)
