"""Shared by the inert-text tests of every surface: random hostile text, and a check for
characters a person could not see — judged by Unicode category, not by the implementation."""

from __future__ import annotations

import unicodedata

from hypothesis import strategies as st

JOINERS = "\u200c\u200d"
STYLE = {chr(c) for c in range(0xFE00, 0xFE10)}

#: Pieces an attacker would try: controls, bidi and invisible characters, and the markup of
#: every surface (Rich, HTML, Slack mrkdwn, Discord markdown).
HOSTILE = [
    *"\x1b\r\n\t\x07\x08\x00\x7f\x85\x9b\u202e\u202d\u2066\u2069\u200e\u200f\u061c",
    *"\u200b\u200c\u200d\u2060\ufeff\ufe0f\U000e0041\u2028[]/\\<>&*_~|`#-()\"'",
    "[bold]",
    "[/]",
    "[/bold]",
    "[conceal]",
    "[link=https://evil.example]",
    ":smile:",
    "\x1b[2J",
    "\x1b[2K\x1b[G",
    "<script>",
    "<!channel>",
    "<@U123>",
    "<https://evil.example|ok>",
    "||x||",
    "[ok](https://evil.example)",
    "@everyone",
    "\r\nBcc: x@evil.example",
    "{{DATE(2017-02-14T06:08:39Z, SHORT)}}",
]

hostile_text = st.lists(
    st.one_of(st.sampled_from(HOSTILE), st.characters(), st.text(max_size=4)), max_size=12
).map("".join)


def hidden_chars(text: str, *, newlines_allowed: bool = False) -> list[str]:
    """Characters a person could not see, or that rewrite the display. Joiners and style
    selectors count only where they do not shape non-ASCII text (emoji, Indic, Persian)."""
    found = []
    for i, ch in enumerate(text):
        if ch == "\n" and newlines_allowed:
            continue
        before = text[i - 1] if i else ""
        after = text[i + 1] if i + 1 < len(text) else ""
        if ch in JOINERS:
            if not (before and after and not before.isascii() and not after.isascii()):
                found.append(ch)
            continue
        if ch in STYLE:
            keycap = bool(before) and before in "0123456789#*" and after == "\u20e3"
            if not (keycap or (before and not before.isascii())):
                found.append(ch)
            continue
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs"):
            found.append(ch)
    return found
