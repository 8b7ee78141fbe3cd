"""The non-interactive shell allow-list: deepagents CLI's contract, hostile commands, and
properties — including a real ``bash`` as the oracle for what an allowed command runs."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from signoff.checks.shell import AllowList, check_command, parse_entry

ALLOW = AllowList(["ls", "cat", "grep", "echo", "git status"])


def allowed(command: str, allow: AllowList = ALLOW) -> bool:
    return check_command(command, allow).allowed


# ---------------------------------------------------------------- the contract
@pytest.mark.parametrize(
    "command",
    [
        "ls",
        "ls -la /tmp",
        "  cat notes.txt  ",
        "ls && cat a.txt",
        "ls || echo none",
        "ls; cat a",
        "cat a | grep b",
        "cat a | grep b | grep -v c",
        "git status",
        "git status --short && ls",
        "echo 'a b'",
        'grep "x y" file',
        "ls;",
        "echo résumé.txt",
        "cat ~/notes",
    ],
)
def test_commands_made_only_of_allowed_commands_pass(command: str) -> None:
    assert check_command(command, ALLOW) == (True, "")


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("rm -rf /", "part 1 (`rm -rf`) does not start with an allowed command"),
        ("ls && rm -rf /", "part 2 (`rm -rf`)"),
        ("ls || rm x", "part 2"),
        ("ls; rm x", "part 2"),
        ("cat a | sh", "part 2 (`sh`)"),
        ("git push", "(`git push`)"),
        ("git", "(`git`)"),
        ("gitstatus", "(`gitstatus`)"),
        ("lsblk", "(`lsblk`)"),
    ],
)
def test_a_segment_not_starting_with_an_allowed_command_is_refused(
    command: str, reason: str
) -> None:
    check = check_command(command, ALLOW)
    assert not check.allowed
    assert reason in check.reason


@pytest.mark.parametrize(
    ("command", "what"),
    [
        ('ls "$(rm -rf /)"', "command substitution `$(`"),
        ("ls `rm -rf /`", "backtick"),
        ("echo $HOME", "variable expansion `$`"),
        ("echo ${HOME}", "variable expansion `${`"),
        ("echo ${x:-$(rm x)}", "command substitution `$(`"),
        ("echo $1", "`$`"),
        ("echo $$", "`$`"),
        ("echo $?", "`$`"),
        ("echo $'\\x3b'", "`$`"),
        ('echo $"x"', "`$`"),
        ("ls > out", "a redirect `>`"),
        ("ls >> out", "append redirect"),
        ("cat < /etc/shadow", "input redirect"),
        ("ls &> out", "a redirect `&>`"),
        ("ls 2>&1", "a redirect `>`"),
        ("cat <<EOF", "here-document"),
        ("cat <<< hi", "here-string"),
        ("cat <(rm x)", "process substitution `<(`"),
        ("ls >(rm x)", "process substitution `>(`"),
        ("ls & rm x", "background operator"),
        ("ls &", "background operator"),
        ("ls |& rm x", "background operator"),
        ("ls &&& rm x", "background operator"),
        ("ls () ( rm -rf ~ ); ls", "function definition `(`"),
        ("(rm x)", "subshell"),
        ("ls\nrm x", "U+000A"),
        ("ls\rrm x", "U+000D"),
        ("ls\trm", "U+0009"),
        ("ls\x00", "U+0000"),
        ("ls\u2028rm x", "U+2028"),
        ("ls\u00a0-la", "U+00A0"),
        ("ls \u202erm", "U+202E"),
        ("ls\u200b;rm", "U+200B"),
    ],
)
def test_constructs_that_run_or_redirect_something_else_are_refused(
    command: str, what: str
) -> None:
    check = check_command(command, ALLOW)
    assert not check.allowed
    assert what in check.reason


@pytest.mark.parametrize(
    "command",
    [
        'ls "a;b"',  # `;` inside quotes: split anyway, then unparseable — refused
        "grep 'a|b' f",
        "ls \\; rm x",
        "ls 'unclosed",
        "echo \\",
    ],
)
def test_separators_inside_quotes_or_escapes_are_refused_not_guessed(command: str) -> None:
    assert not allowed(command)


@pytest.mark.parametrize(
    "command",
    [
        "ｌｓ",  # fullwidth lookalike
        "ⅼs",  # U+217C small roman numeral fifty
        "lѕ",  # Cyrillic dze
        "ls ；rm -rf ~",  # a fullwidth semicolon is no separator to bash: ls gets odd args
    ],
)
def test_unicode_lookalikes_never_match_an_entry(command: str) -> None:
    # The last one passes: bash too reads `；rm` as an argument of ls, not a command.
    assert allowed(command) is (command == "ls ；rm -rf ~")


@pytest.mark.parametrize("command", ["", "   ", ";", " && ", "|", "''"])
def test_empty_commands_are_refused(command: str) -> None:
    assert not allowed(command)


@pytest.mark.parametrize("command", [None, 3, ["ls"], {"cmd": "ls"}])
def test_a_command_that_is_not_text_is_refused(command: object) -> None:
    check = check_command(command, ALLOW)
    assert not check.allowed and "not a string" in check.reason


def test_an_empty_allow_list_allows_nothing() -> None:
    check = check_command("ls", AllowList([]))
    assert check == (False, "no command is allow-listed")


def test_quotes_are_removed_before_comparing_like_a_shell_does() -> None:
    assert allowed("'ls' -la") and allowed('"git" status')
    assert allowed("l's' x")


def test_an_entry_of_several_words_matches_only_those_first_words() -> None:
    allow = AllowList(["git status", "git log --oneline"])
    assert allowed("git status -s", allow)
    assert allowed("git log --oneline -5", allow)
    assert not allowed("git log -p", allow)
    assert not allowed("git statusx", allow)


@pytest.mark.parametrize(
    "entry",
    ["", " ", "ls;", "git  status", "$(x)", "l*", "ls\n", "'ls'", "rm -rf ~", 3, None],
)
def test_bad_allow_list_entries_are_refused_with_what_is_wrong(entry: object) -> None:
    with pytest.raises(ValueError, match="allow-list entry"):
        parse_entry(entry)


def test_reasons_show_agent_text_inert_and_short() -> None:
    check = check_command("\x1b[2Jevil" + "x" * 100, ALLOW)
    assert not check.allowed and "\x1b" not in check.reason
    check = check_command("x" * 500, ALLOW)
    assert len(check.reason) < 120


# ---------------------------------------------------------------- properties
WORDS = st.sampled_from(["ls", "cat", "grep", "echo", "git", "status", "rm", "sh", "-la", "x"])
SAFE_ARG = st.text(alphabet="abcxyz0123456789-_./=,:@%+", min_size=1, max_size=8)
SEPARATOR = st.sampled_from([" && ", " || ", "; ", " | ", ";", "|"])
HOSTILE = st.sampled_from(
    [
        "$(rm x)",
        "`rm x`",
        "$HOME",
        "${x}",
        "$1",
        "> f",
        ">> f",
        "< f",
        "<<< x",
        "<< E",
        "<(rm)",
        ">(rm)",
        " & ",
        "&>f",
        "\n",
        "\r",
        "\t",
        "(",
        ")",
        "\u202e",
        "\u00a0",
        "\x00",
    ]
)


@st.composite
def allowed_commands(draw: st.DrawFn) -> str:
    segments = []
    for _ in range(draw(st.integers(1, 4))):
        head = draw(st.sampled_from(["ls", "cat", "grep", "echo", "git status"]))
        args = draw(st.lists(SAFE_ARG, max_size=3))
        segments.append(" ".join([head, *args]))
    out = segments[0]
    for segment in segments[1:]:
        out += draw(SEPARATOR) + segment
    return out


@settings(max_examples=400, deadline=None)
@given(allowed_commands())
def test_property_segments_of_allowed_commands_pass(command: str) -> None:
    assert allowed(command)


@settings(max_examples=400, deadline=None)
@given(allowed_commands(), HOSTILE, st.data())
def test_property_any_hostile_construct_anywhere_is_refused(
    command: str, hostile: str, data: st.DataObject
) -> None:
    at = data.draw(st.integers(0, len(command)))
    assert not allowed(command[:at] + hostile + command[at:])


@settings(max_examples=400, deadline=None)
@given(allowed_commands(), SEPARATOR, st.sampled_from(["rm", "sh", "python3", "curl", "git"]))
def test_property_one_segment_off_the_list_refuses_the_whole_command(
    command: str, separator: str, bad: str
) -> None:
    assert not allowed(command + separator + bad + " x")
    assert not allowed(bad + " x" + separator + command)


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=60))
def test_property_any_text_gets_an_answer_never_an_exception(command: str) -> None:
    check = check_command(command, ALLOW)
    assert isinstance(check.allowed, bool)
    assert check.allowed or check.reason


# ---------------------------------------------------------------- bash as the oracle
# Text built from shell-significant pieces; whatever the check allows is run by a real bash
# with a PATH holding only stubs, and its trace (`set -x`) lists every simple command bash
# ran. Each must start with an allow-listed entry: no quoting trick may smuggle another in.
PIECES = st.sampled_from(
    [
        "ls", "cat", "echo", "git", "status", "rm", "sh", "eval", "exec", "x", "-la",
        " ", " ", " ", ";", "&&", "||", "|", "&", "'", '"', "\\", "{", "}", "!", "#",
        "*", "?", "~", "=", "a=b", "ls()", "{ls,rm}", "l\\s", "'l's", '"rm"', "f\\;", "(", ")",
        "$", "$x", ">", "<", "`", "ls () ", "( rm x )", "{ rm x; }", "; ls",
    ]
)  # fmt: skip


@pytest.fixture(scope="module")
def stub_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bin_dir = tmp_path_factory.mktemp("bin")
    for name in ("ls", "cat", "grep", "echo", "git", "rm", "sh"):
        stub = bin_dir / name
        stub.write_text("#!/bin/sh\nexit 0\n")
        stub.chmod(0o755)
    return bin_dir


TRACE = re.compile(r"^\++ (.*)$")


def traced_commands(command: str, cwd: Path, bin_dir: Path) -> list[list[str]]:
    """The simple commands bash ran for ``command``, as words (its xtrace lines)."""
    script = "PS4='+ '; set -x; " + command
    run = subprocess.run(  # a local bash on generated text, in a temp dir
        ["/usr/bin/bash", "--noprofile", "--norc", "-c", script],
        cwd=cwd,
        env={"PATH": str(bin_dir), "HOME": str(cwd), "LC_ALL": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    # Each nesting level (subshell, function, substitution) adds a `+` to PS4.
    lines = [m.group(1) for m in map(TRACE.match, run.stderr.splitlines()) if m]
    return [shlex.split(line) for line in lines]


@st.composite
def shell_soup(draw: st.DrawFn) -> str:
    """An allowed command with shell pieces spliced in anywhere, or pieces alone."""
    if draw(st.booleans()):
        return "".join(draw(st.lists(PIECES, min_size=1, max_size=12)))
    command = draw(allowed_commands())
    for piece in draw(st.lists(PIECES, min_size=1, max_size=4)):
        at = draw(st.integers(0, len(command)))
        command = command[:at] + piece + command[at:]
    return command


@pytest.mark.skipif(not os.path.exists("/usr/bin/bash"), reason="needs /usr/bin/bash")
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(command=shell_soup())
@example(command="ls () ( rm x ); ls")  # a function named ls: both segments "start with ls"
@example(command="ls () { rm x; }; ls")
@example(command="ls x & rm x")
@example(command="ls $(rm x)")
def test_property_bash_runs_only_allowed_commands_when_the_check_allows(
    command: str, stub_path: Path, tmp_path: Path
) -> None:
    if not allowed(command):
        return
    for words in traced_commands(command, tmp_path, stub_path):
        assert ALLOW.matches(words), (command, words)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=["Cc", "Cs"]), max_size=40))
def test_property_the_fast_word_split_agrees_with_shlex(segment: str) -> None:
    from signoff.checks.shell import _words

    try:
        expected: list[str] | None = shlex.split(segment)
    except ValueError:
        expected = None
    if any(c.isspace() and c != " " for c in segment):
        return  # refused before splitting (only the ASCII space separates words here)
    assert _words(segment) == expected
