"""``matches`` / ``not_matches`` run on RE2: linear time, Python's meaning, clear refusals."""

from __future__ import annotations

import copy
import json
import re
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from signoff.cli import app
from signoff.model import PolicyError
from signoff.policy.regex import RegexError, ascii_classes, compile_regex, translate
from tests.policy.helpers import call, kind_of, load, load_error, messages, one_rule

MAX_ARGS_BYTES = 262_144  # the limits section's default max_args_bytes
EMAIL = r"^([a-zA-Z0-9_.+-])+@(([a-zA-Z0-9-])+\.)+([a-zA-Z0-9]{2,4})+$"


def finishes(work: Callable[[], Any], watchdog_s: float = 120.0) -> Any:
    """``work()``'s result; fails (instead of hanging the suite) if it never returns.

    A hang guard, not a timing assertion: RE2 releases the GIL, so the watchdog can fire.
    """
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(work()), daemon=True)
    thread.start()
    thread.join(watchdog_s)
    assert out, f"still matching after {watchdog_s:.0f} s: catastrophic backtracking"
    return out[0]


# ---------------------------------------------------------------- ReDoS patterns, 256 KiB


@pytest.mark.parametrize(
    ("pattern", "crafted", "matching"),
    [
        ("(a+)+$", "a" * (MAX_ARGS_BYTES - 1) + "!", "a" * MAX_ARGS_BYTES),
        ("(a|aa)+$", "a" * (MAX_ARGS_BYTES - 1) + "!", "a" * MAX_ARGS_BYTES),
        (EMAIL, "a@" + "a" * (MAX_ARGS_BYTES - 3) + "!", "ops@example.com"),
        (r"(.*a){20}", "a" * 19 + "b" * (MAX_ARGS_BYTES - 19), "ba" * 20),
    ],
    ids=["nested-plus", "overlapping-alternation", "email", "repeated-dot-star"],
)
def test_redos_pattern_on_a_256_kib_argument_gives_the_right_verdict(
    pattern: str, crafted: str, matching: str
) -> None:
    policy = one_rule({"args.s": {"matches": pattern}})
    assert finishes(lambda: kind_of(policy, call("t", s=crafted))) == "allow"
    assert finishes(lambda: kind_of(policy, call("t", s=matching))) == "deny"


def test_not_matches_on_a_crafted_argument_gives_the_right_verdict() -> None:
    policy = one_rule({"args.s": {"not_matches": "(a+)+$"}})
    crafted = "a" * (MAX_ARGS_BYTES - 1) + "!"
    assert finishes(lambda: kind_of(policy, call("t", s=crafted))) == "deny"


# ---------------------------------------------------------------- Python's meaning kept


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        ("rm", "ls; rm -rf /", True),  # a search, not a full match
        ("^rm", "ls; rm -rf /", False),
        ("abc$", "abc\n", True),  # Python's $: also before a final newline
        ("abc$", "abc\nx", False),
        (r"abc\Z", "abc\n", False),  # \Z: the very end
        (r"abc\Z", "abc", True),
        ("(?m)^b$", "a\nb\nc", True),
        ("^b$", "a\nb\nc", False),
        ("a.c", "a\nc", False),
        ("(?s)a.c", "a\nc", True),
        ("(?i)SECRET", "my_secret", True),
        ("a{,2}b", "xaab", True),  # {,n} is {0,n}
        ("^a{,2}$", "aaa", False),
        ("x{,y}", "x{,y}", True),  # not a repeat: literal, as in Python
        (r"[\b]", "\b", True),  # a backspace inside a class
        (r"\s", "\x0b", True),  # Python's \s includes the vertical tab
        (r"^\S+$", "a\x0bb", False),
        (r"[^\S]", "\x0b", True),
        (r"caf\u00e9", "café", True),
        (r"\N{EM DASH}", "a — b", True),
        (r"\U0001F600", "😀", True),
        (r"\Q.*\E", "a.*b", True),
        ("x.y", "x\ud800y", True),  # a lone surrogate (valid in JSON) is a character
        (r"[]a]", "]", True),
        (r"[[:digit:]]", "5", True),
    ],
)
def test_pattern_keeps_python_meaning(pattern: str, text: str, expected: bool) -> None:
    assert compile_regex(pattern).search(text) is expected


def test_ignore_case_covers_non_ascii_letters() -> None:
    assert compile_regex("straße|ÉTÉ", ignore_case=True).search("été")


# Patterns from a grammar both engines read the same way; `$` only where nothing after it
# could consume the final newline (the one corner where RE2 cannot copy Python's `$`).
_ATOMS = ["a", "b", "A", ".", "[ab]", "[^a]", r"\n", r"\s", r"\S", r"\w", r"\d", r"\W", "1",
          " ", "[]a]", r"\$", "[$]", r"[\s]", r"[^\S]"]  # fmt: skip
_ANCHORS = ["^", r"\A", r"\Z", r"\b"]
_QUANTIFIERS = ["", "*", "+", "?", "{2}", "{1,2}", "{,2}", "*?", "??"]
_FLAGS = ["", "(?m)", "(?s)", "(?i)"]


@st.composite
def _patterns(draw: st.DrawFn, depth: int = 0) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < 2 and draw(st.booleans()) and draw(st.booleans()):
            inner = draw(_patterns(depth + 1))
            if draw(st.booleans()):
                inner += "|" + draw(_patterns(depth + 1))
            opener = draw(st.sampled_from(["(", "(?:", "(?m:", "(?s:", "(?-m:"]))
            parts.append(opener + inner + ")" + draw(st.sampled_from(["", "?"])))
        elif draw(st.integers(0, 5)) == 0:
            parts.append(draw(st.sampled_from(_ANCHORS)))
        else:
            parts.append(draw(st.sampled_from(_ATOMS)) + draw(st.sampled_from(_QUANTIFIERS)))
    if depth == 0 and draw(st.booleans()):
        parts.append("$")
    return "".join(parts)


@settings(max_examples=400, deadline=None)
@given(
    flags=st.sampled_from(_FLAGS),
    pattern=_patterns(),
    texts=st.lists(st.text(alphabet="abAB1 _\n\t\x0b", max_size=8), min_size=1, max_size=8),
)
def test_search_agrees_with_python_re_on_ascii_text(
    flags: str, pattern: str, texts: list[str]
) -> None:
    full = flags + pattern
    python = re.compile(full)
    compiled = compile_regex(full)
    for text in texts:
        assert compiled.search(text) == (python.search(text) is not None), (full, text)


def test_translation_leaves_multiline_dollar_and_quoted_text_alone() -> None:
    assert translate("(?m)a$") == "(?m)a$"
    assert translate("(?m:a$)b$") == r"(?m:a$)b(?:\n?\z)"
    assert translate(r"\Qa$\E") == r"\Qa$\E"
    assert translate("[$]") == "[$]"


# ---------------------------------------------------------------- what RE2 refuses

REFUSED = """\
version: 1
tools:
  shell:
    default: allow
    rules:
      - id: odd-pattern
        when: {args.command: {OP: 'PATTERN'}}
        decision: require_approval
"""


@pytest.mark.parametrize(
    ("pattern", "hint"),
    [
        (r"(rm|mv) .* \1", "no backreferences"),
        ("(?P<verb>rm) (?P=verb)", "no backreferences"),
        ("curl(?=.*sh)", "no lookahead or lookbehind"),
        ("^(?!ls )", "no lookahead or lookbehind"),
        ("(?<=sudo )rm", "no lookahead or lookbehind"),
        ("(?<!#)rm", "no lookahead or lookbehind"),
        ("(?>a+)b", "no atomic groups or possessive quantifiers"),
        ("a++b", "no atomic groups or possessive quantifiers"),
        ("(?x) rm  -rf", "no verbose mode"),
        ("a{1001}", "up to 1000"),
    ],
)
@pytest.mark.parametrize("op", ["matches", "not_matches"])
def test_pattern_re2_cannot_take_fails_at_load_with_file_line_rule_and_hint(
    op: str, pattern: str, hint: str
) -> None:
    err = load_error(REFUSED.replace("OP", op).replace("PATTERN", pattern))
    assert err.file == "signoff.yaml"
    assert err.path == f"signoff.yaml.tools.shell.rules[0].when.args.command.{op}"
    assert err.line == 7
    assert "rule 'odd-pattern'" in err.message
    assert f"bad regular expression '{pattern}'" in err.message
    assert hint in err.message


def test_every_refused_pattern_is_reported_in_one_pass() -> None:
    err = load_error(
        """\
        version: 1
        tools:
          shell:
            rules:
              - id: one
                when: {args.command: {matches: '(a)\\1'}}
                decision: allow
              - id: two
                when: {args.command: {not_matches: '(?=x)'}}
                decision: allow
        """
    )
    found = messages(err)
    assert len(found) == 2
    assert "(line 6)" in found[0] and "rule 'one'" in found[0]
    assert "(line 9)" in found[1] and "rule 'two'" in found[1]


def test_compile_error_is_a_value_error_naming_the_pattern() -> None:
    with pytest.raises(RegexError, match=r"bad regular expression '\(a\)\\1'") as info:
        compile_regex(r"(a)\1")
    assert isinstance(info.value, ValueError)


# ---------------------------------------------------------------- ASCII-only classes


def test_unicode_word_characters_do_not_match_backslash_w() -> None:
    policy = one_rule({"args.s": {"matches": r"^\w+$"}})
    assert kind_of(policy, call("t", s="hello_42")) == "deny"
    assert kind_of(policy, call("t", s="héllo")) == "allow"  # Python's re said deny


def test_ascii_class_in_a_pattern_is_a_warning_with_path_line_and_rule() -> None:
    policy = load(
        r"""
        tools:
          shell:
            default: allow
            rules:
              - id: plain-words
                when: {args.command: {matches: '^\w+\s\d$'}}
                decision: deny
                reason: only plain words
        """
    )
    [warning] = [w for w in policy.warnings if "ASCII" in w]
    assert warning.startswith("signoff.yaml.tools.shell.rules[0].when.args.command.matches")
    assert "(line 7)" in warning  # `load` adds the version line
    assert "rule 'plain-words'" in warning
    assert r"\w, \d in '^\w+\s\d$'" in warning


@pytest.mark.parametrize(
    "pattern", [r"[A-Za-z0-9_]+", r"\\w", r"[\b]", r"\p{L}+", r"\Q\w\E", r"rm\s+-rf"]
)
def test_explicit_sets_give_no_ascii_warning(pattern: str) -> None:
    assert ascii_classes(pattern) == []


@pytest.mark.parametrize(
    ("pattern", "found"),
    [(r"\bword\b", [r"\b"]), (r"[\w-]+", [r"\w"]), (r"\D\S\W\B", [r"\D", r"\W", r"\B"])],
)
def test_ascii_classes_are_found_inside_and_outside_sets(pattern: str, found: list[str]) -> None:
    assert ascii_classes(pattern) == found


def test_policy_check_warns_about_ascii_classes_and_fails_on_lookaround(tmp_path: Path) -> None:
    path = tmp_path / "signoff.yaml"
    body = REFUSED.replace("OP", "matches")
    path.write_text(body.replace("PATTERN", r"^\d+$"))
    result = CliRunner().invoke(app, ["policy", "check", "--config", str(path), "--json"])
    assert result.exit_code == 0, result.output
    [warning] = [w for w in json.loads(result.output)["warnings"] if "ASCII" in w]
    assert r"\d" in warning and "ASCII" in warning and "line 7" in warning

    path.write_text(body.replace("PATTERN", "^(?!ls)"))
    result = CliRunner().invoke(app, ["policy", "check", "--config", str(path), "--json"])
    assert result.exit_code == 2
    [error] = json.loads(result.output)["errors"]
    assert "line 7" in error and "rule 'odd-pattern'" in error and "lookahead" in error


def test_example_policies_have_no_ascii_class_surprises() -> None:
    """The shipped examples load cleanly under RE2 (no refused pattern)."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    for path in sorted(examples.rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        if "matches:" not in text or not text.lstrip().startswith("version:"):
            continue
        try:
            load(textwrap.dedent(text))
        except PolicyError as exc:  # a file that needs env vars etc. is not this test's business
            assert "regular expression" not in str(exc), (path, exc)


def test_a_compiled_pattern_survives_deepcopy() -> None:
    regex = compile_regex("(?i)token")
    assert copy.deepcopy(regex).search("API_TOKEN")


@pytest.mark.parametrize(("pattern", "warned"), [("a[ab]{999}c", True), ("x{2,40}y", False)])
def test_a_large_repetition_count_is_a_warning(pattern: str, warned: bool) -> None:
    policy = load(
        f"""
        tools:
          shell:
            default: allow
            rules:
              - id: counted
                when: {{args.command: {{matches: '{pattern}'}}}}
                decision: deny
                reason: too slow
        """
    )
    found = [w for w in policy.warnings if "repetition count" in w]
    assert bool(found) is warned
    if warned:
        assert "rule 'counted'" in found[0] and "999" in found[0]
