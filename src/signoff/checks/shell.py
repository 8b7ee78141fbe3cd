"""Is a shell command made only of allow-listed commands? The non-interactive allow-list.

The contract is deepagents CLI's (``is_shell_command_allowed``): the command is split into
segments on ``&&``, ``||``, ``;`` and ``|``, and it passes only if **every** segment starts
with an allow-listed command (an entry of several words, like ``git status``, must match the
segment's first words) and nothing in it can run or redirect something else: no ``$(``,
backticks, redirects, here-documents or here-strings, process substitution, ``${``, ``$VAR``
or a lone ``&``. The text is checked *before* it is parsed, so a construct is refused even
inside quotes; an unparseable segment is refused too.

This check is stricter than deepagents' wherever a shell could read the text differently
from ``shlex``; when in doubt it refuses:

* every ``$`` is refused, not only ``$VAR`` (also ``$1``, ``$$``, ``$?``, ``$'…'``, ``$"…"``);
* ``(`` and ``)`` are refused: ``ls () ( rm -rf ~ ); ls`` defines a function named ``ls``
  whose segments both "start with ``ls``";
* control and format characters (newline, carriage return, tab, NUL, bidi overrides,
  zero-width characters) and every space character other than the ASCII space are refused,
  so nothing can hide a separator or make the command look different from what runs;
* a segment holding a stray ``&`` (as in ``ls &&& rm``) is refused.

Allow-list entries are plain words (letters, digits and ``_ . / + : @ % = , -``), compared
with the segment's words after shell quoting is removed: ``'ls'`` is ``ls``; ``ｌｓ`` is not.
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from collections.abc import Iterable
from typing import Final, NamedTuple

from signoff.model.text import inert

#: Substrings refused anywhere in a command, with what they are, checked in this order.
FORBIDDEN: Final[tuple[tuple[str, str], ...]] = (
    ("$(", "command substitution `$(`"),
    ("`", "backtick command substitution"),
    ("${", "variable expansion `${`"),
    ("$", "variable expansion `$`"),
    ("<(", "process substitution `<(`"),
    (">(", "process substitution `>(`"),
    ("<<<", "a here-string `<<<`"),
    ("<<", "a here-document `<<`"),
    ("&>", "a redirect `&>`"),
    (">>", "an append redirect `>>`"),
    (">", "a redirect `>`"),
    ("<", "an input redirect `<`"),
    ("(", "a subshell or function definition `(`"),
    (")", "a subshell or function definition `)`"),
)
_LONE_AMPERSAND: Final = re.compile(r"(?<!&)&(?!&)")
_SEPARATORS: Final = re.compile(r"&&|\|\||[|;]")
_ASCII_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_QUOTING: Final = re.compile(r"['\"\\]")
_ENTRY_WORD: Final = re.compile(r"[A-Za-z0-9_./+:@%=,-]+")
_SHOWN: Final = 40  # at most this many characters of a command word in a reason


class ShellCheck(NamedTuple):
    """The answer: allowed, or refused with a reason naming what was found."""

    allowed: bool
    reason: str


class AllowList:
    """Allow-listed commands, each as its words (``"git status"`` → ``("git", "status")``)."""

    __slots__ = ("entries",)

    def __init__(self, entries: Iterable[str]) -> None:
        self.entries: tuple[tuple[str, ...], ...] = tuple(parse_entry(e) for e in entries)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def __str__(self) -> str:
        return ", ".join(" ".join(words) for words in self.entries)

    def matches(self, words: list[str]) -> bool:
        return any(tuple(words[: len(entry)]) == entry for entry in self.entries)


def parse_entry(entry: object) -> tuple[str, ...]:
    """One allow-list entry as its words; ValueError saying what is wrong with it."""
    if not isinstance(entry, str):
        raise ValueError(f"an allow-list entry is a string, got {type(entry).__name__}")
    words = tuple(entry.split(" "))
    if not entry.strip() or any(not _ENTRY_WORD.fullmatch(w) for w in words):
        raise ValueError(
            f"allow-list entry {entry!r} must be one or more plain words separated by single "
            "spaces (letters, digits and _ . / + : @ % = , -), like `ls` or `git status`"
        )
    return words


def check_command(command: object, allow_list: AllowList) -> ShellCheck:
    """Whether ``command`` may run with nobody to ask: see the module docstring."""
    if not isinstance(command, str):
        return _refused(f"the command is not a string (got {type(command).__name__})")
    if not command.strip():
        return _refused("the command is empty")
    if not allow_list:
        return _refused("no command is allow-listed")
    problem = _forbidden_construct(command)
    if problem:
        return _refused(f"it contains {problem}")
    found = False
    for number, segment in enumerate(_SEPARATORS.split(command), start=1):
        if not segment.strip():
            continue
        if "&" in segment:
            return _refused(f"part {number} contains a background operator `&`")
        words = _words(segment)
        if words is None:
            return _refused(f"part {number} cannot be parsed (an unclosed quote or escape)")
        if not words:
            continue
        if not allow_list.matches(words):
            shown = inert(" ".join(words[:2]))[:_SHOWN]
            return _refused(f"part {number} (`{shown}`) does not start with an allowed command")
        found = True
    if not found:
        return _refused("the command has no command in it")
    return ShellCheck(True, "")


def _words(segment: str) -> list[str] | None:
    """The segment's words as a POSIX shell splits them; None when it cannot be parsed."""
    if not _QUOTING.search(segment):  # the common case: the same answer, without shlex
        return segment.split()
    try:
        return shlex.split(segment)
    except ValueError:
        return None


def _forbidden_construct(command: str) -> str | None:
    odd = _odd_char(command)
    if odd is not None:
        return f"the character U+{ord(odd):04X} ({_char_name(odd)})"
    for text, what in FORBIDDEN:
        if text in command:
            return what
    if _LONE_AMPERSAND.search(command):
        return "a background operator `&`"
    return None


def _odd_char(command: str) -> str | None:
    """The first control, format, surrogate, private or unassigned character, or space
    character other than the ASCII space."""
    if command.isascii():
        found = _ASCII_CONTROL.search(command)
        return found.group() if found else None
    for ch in command:
        if ch != " " and unicodedata.category(ch)[0] in "CZ":
            return ch
    return None


def _char_name(ch: str) -> str:
    return unicodedata.name(ch, "control character").lower()


def _refused(reason: str) -> ShellCheck:
    return ShellCheck(False, reason)


__all__ = ["FORBIDDEN", "AllowList", "ShellCheck", "check_command", "parse_entry"]
