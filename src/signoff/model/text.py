"""Text an agent or an approver wrote, made inert before a person reads it.

An approver signs off on what they *see*, so what they see must be what runs. Agent text
may carry terminal escape sequences (``ESC[2J`` clears the screen), carriage returns and
backspaces that overwrite a line, bidi overrides that reverse it (U+202E), zero-width and
tag characters that hide part of it, and lone surrogates that crash an encoder.
:func:`inert` replaces each of those with a visible stand-in and leaves every other
character alone, so ordinary text in any script, and emoji, look the same.

Each surface then escapes its own markup on top (Rich, HTML, Slack mrkdwn, Discord
markdown); ``docs/security.md`` lists what each one does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

#: What a line break inside one value looks like (a value never starts a new line).
NEWLINE: Final = "⏎"

_ALWAYS = (
    "\x00-\x1f\x7f-\x9f"  # C0 (ESC, CR, BEL, BS, LF, TAB…), DEL, C1 (incl. CSI)
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\uffa0"  # invisible
    "\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2"  # Arabic / Syriac format marks
    "\u200b\u200e\u200f\u2028-\u202e\u2060-\u206f"  # zero width, LRM/RLM, LS/PS, bidi
    "\ufeff\ufff9-\ufffb\ud800-\udfff"  # BOM / zero-width no-break space, lone surrogates
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff"  # tags (ASCII smuggling), variation selectors 17-256
)
_JOINERS = "\u200c\u200d"
_STYLE = "\ufe00-\ufe0f"  # variation selectors 1-16: emoji or text presentation
#: A visible non-ASCII character: what joiners and style selectors may legitimately touch.
_SHAPED = f"[^\\x00-\\x7f{_ALWAYS}{_JOINERS}{_STYLE}]"

#: Characters that are invisible, reorder or rewrite what is shown, or cannot be encoded.
#: Joiners shape emoji sequences and Indic or Persian words, so they are kept between two
#: visible non-ASCII characters (a style selector counts on the left: ❤️‍🔥); style
#: selectors are kept after a visible non-ASCII character and in keycaps (1️⃣).
#: Anything else of theirs is shown, so they can never hide inside ASCII text.
_HIDDEN: Final = re.compile(
    f"[{_ALWAYS}]"
    f"|(?<!{_SHAPED})(?<!{_SHAPED}[{_STYLE}])[{_JOINERS}]|[{_JOINERS}](?!{_SHAPED})"
    f"|(?<!{_SHAPED})(?<![0-9#*])[{_STYLE}]|(?<=[0-9#*])[{_STYLE}](?!\u20e3)"
)
_HIDDEN_KEEPING_NEWLINES: Final = re.compile(rf"(?!\n)(?:{_HIDDEN.pattern})")
_SUSPECT: Final = re.compile(f"[{_ALWAYS}{_JOINERS}{_STYLE}]")  # a cheap first look


def inert(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every control, format, separator and surrogate character made visible.

    C0 controls become their Control Pictures symbol (``\\x1b`` → ``␛``, ``\\r`` → ``␍``),
    a line feed becomes ``⏎`` (unless ``keep_newlines``, for surfaces where a line break
    cannot fake anything, like an HTML block), DEL becomes ``␡``, and everything else —
    C1 controls, bidi overrides and isolates, zero-width characters, tags, lone surrogates
    — becomes ``<U+XXXX>``. Brackets, markup and ordinary text pass through unchanged:
    escaping markup is the surface's job.
    """
    if (text.isascii() and text.isprintable()) or _SUSPECT.search(text) is None:
        return text
    pattern = _HIDDEN_KEEPING_NEWLINES if keep_newlines else _HIDDEN
    return pattern.sub(_visible, text)


def editable_json(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON an approver edits by hand: non-ASCII text kept readable, but every
    character :func:`inert` would replace written as a ``\\uXXXX`` escape. The text parses
    back to exactly ``value``, yet a bidi override or an invisible character cannot reorder
    or hide what the field or the editor shows."""
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    if _SUSPECT.search(text) is None:
        return text
    return _HIDDEN_KEEPING_NEWLINES.sub(_json_escape, text)  # a raw line feed is layout


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # a UTF-16 surrogate pair, as JSON writes characters beyond the BMP
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code == 0x0A:
        return NEWLINE
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␀ … ␟
    if code == 0x7F:
        return "␡"
    return f"<U+{code:04X}>"


class _Absent:
    """An argument missing on one side of an edit."""

    def __repr__(self) -> str:
        return "(absent)"


ABSENT: Final = _Absent()


class ArgChange(NamedTuple):
    """One argument an edit changed: its name, the value before and after (or ABSENT)."""

    name: str
    before: Any
    after: Any


def changed_args(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[ArgChange]:
    """The arguments that differ between the original call and the one that will run, in
    the original's order, then the added ones."""
    names = list(before) + [k for k in after if k not in before]
    return [
        ArgChange(k, before.get(k, ABSENT), after.get(k, ABSENT))
        for k in names
        if not _same(before.get(k, ABSENT), after.get(k, ABSENT))
    ]


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON would show them: ``1``, ``1.0`` and ``true`` differ."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and (a is b or a == b)
