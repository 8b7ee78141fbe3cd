"""Every command, against a broken config or store, answers with one line and exit 1 or 2.

The commands are enumerated from typer's registry, so a new command is covered the day it
is added: each one runs with a corrupt file, a missing file and a directory as its config,
as its store, and as any path it takes. With ``--json`` the error is a JSON object on stdout.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from signoff.cli import app

BAD_KINDS = ("corrupt", "missing", "directory")
# Commands that serve until stopped run in a subprocess, so a regression fails, not hangs.
SERVING = {"serve", "mcp-proxy", "inquiry-server"}
# Sample values for required parameters (anything else gets "x"); "--" args go last.
SAMPLES = {"args": "{}", "context": "{}", "decision": "review", "as_json": None}
TRAILING = {"mcp-proxy": ["--", sys.executable, "-c", "pass"]}
# `demo --dir` is a work directory: an existing or a missing one is simply used.
PATH_KINDS = {"demo": ("corrupt",)}

runner = CliRunner()


@dataclass(frozen=True)
class Command:
    words: tuple[str, ...]
    params: tuple[Any, ...]

    @property
    def name(self) -> str:
        return " ".join(self.words)

    def has(self, opt: str) -> bool:
        return any(opt in getattr(p, "opts", ()) for p in self.params)


def registered_commands() -> list[Command]:
    def walk(cmd: Any, words: tuple[str, ...]) -> Iterator[Command]:
        subcommands = getattr(cmd, "commands", None)
        if subcommands is None:
            yield Command(words, tuple(cmd.params))
            return
        for name, sub in subcommands.items():
            yield from walk(sub, (*words, name))

    return list(walk(typer.main.get_command(app), ()))


COMMANDS = registered_commands()


def argv(command: Command, *, config: Path | None, bad_path: Path | None) -> list[str]:
    """The command with its required parameters filled in, ``bad_path`` for its paths."""
    args = list(command.words)
    for param in command.params:
        opts = [o for o in param.opts if o.startswith("-")]
        is_path = takes_path(param) and "--config" not in opts
        if is_path and bad_path is not None:
            args += [*opts[:1], str(bad_path)]
        elif param.required:
            args += [*opts[:1], SAMPLES.get(param.name) or "x"]
    if config is not None:
        args += ["--config", str(config)]
    if command.has("--json"):
        args.append("--json")
    return args + TRAILING.get(command.name, [])


def takes_path(param: Any) -> bool:
    descriptor = getattr(param, "type_descriptor", None)  # typer >= 0.20 (own click)
    if descriptor is not None:
        return descriptor.annotation is Path
    return type(getattr(param, "type", None)).__name__ == "Path"


@pytest.fixture
def bad(tmp_path: Path) -> dict[str, Path]:
    corrupt = tmp_path / "corrupt.bin"
    corrupt.write_bytes(bytes(range(256)) * 16)  # neither YAML text nor an SQLite file
    directory = tmp_path / "a-directory"
    directory.mkdir()
    return {"corrupt": corrupt, "missing": tmp_path / "nowhere" / "x", "directory": directory}


def run(args: list[str], *, subprocess_: bool) -> tuple[int, str, str]:
    if subprocess_:
        done = subprocess.run(
            [sys.executable, "-m", "signoff", *args],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        return done.returncode, done.stdout, done.stderr
    result = runner.invoke(app, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{args}: unhandled {result.exception!r}") from result.exception
    return result.exit_code, result.stdout, result.stderr


def assert_clean(args: list[str], code: int, stdout: str, stderr: str, *, may_pass: bool) -> None:
    where = " ".join(args)
    assert "Traceback" not in stdout + stderr, f"{where}\n{stderr}"
    if code == 0:
        assert may_pass, f"{where} succeeded on a broken input:\n{stdout}"
        return
    assert code in (1, 2), f"{where}: exit {code}\n{stderr}"
    lines = [line for line in stderr.splitlines() if line.strip()]
    if "--json" in args:
        shown = json.loads(stdout)
        assert "error" in shown or shown.get("ok") is False, f"{where}: {stdout}"
        if not lines:
            return  # a report command (policy check, db check) answers in its JSON alone
    if lines[0].endswith("error(s)"):  # policy check's own format: one bullet per error
        assert all(line.startswith("  • ") for line in lines[1:]), f"{where}:\n{stderr}"
        return
    # Warnings and log lines may come first; the error itself is one line.
    assert [ln for ln in lines if ln.startswith("error: ")], f"{where}: no error line\n{stderr}"
    assert all(ln.startswith(("error: ", "warning: ", "signoff: ")) for ln in lines), (
        f"{where}: not one line:\n{stderr}"
    )
    assert sum(ln.startswith("error: ") for ln in lines) == 1, f"{where}:\n{stderr}"


@pytest.mark.parametrize("kind", BAD_KINDS)
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_a_broken_config_is_one_line_and_exit_2_or_1(
    command: Command, kind: str, bad: dict[str, Path]
) -> None:
    if command.has("--config"):
        args = argv(command, config=bad[kind], bad_path=None)
    else:  # no config: its paths (init's file, demo's work directory) get the bad one
        if kind not in PATH_KINDS.get(command.name, BAD_KINDS):
            pytest.skip(f"{command.name}: a {kind} path is a valid input")
        args = argv(command, config=None, bad_path=bad[kind])
    code, stdout, stderr = run(args, subprocess_=False)
    assert_clean(args, code, stdout, stderr, may_pass=False)


@pytest.mark.parametrize("kind", BAD_KINDS)
@pytest.mark.parametrize(
    "command", [c for c in COMMANDS if c.has("--config")], ids=lambda c: c.name
)
def test_a_broken_store_is_one_line_never_a_traceback(
    command: Command, kind: str, bad: dict[str, Path], tmp_path: Path
) -> None:
    config = tmp_path / "signoff.yaml"
    config.write_text(
        textwrap.dedent(f"""
        version: 1
        store: sqlite:///{bad[kind]}
        people: {{x: {{roles: [ops]}}}}
        tools: {{deploy: {{default: require_approval, approvers: {{roles: [ops]}}}}}}
        """)
    )
    args = argv(command, config=config, bad_path=bad[kind])
    if command.has("--store"):
        args += ["--store", f"sqlite:///{bad[kind]}"]
    code, stdout, stderr = run(args, subprocess_=command.name in SERVING)
    # Commands that never open the store (policy check/explain) may succeed.
    assert_clean(args, code, stdout, stderr, may_pass=True)


def test_every_command_is_covered() -> None:
    names = {c.name for c in COMMANDS}
    assert {"pending", "show", "serve", "policy explain", "db status", "token list"} <= names


def test_pending_on_a_corrupt_store_names_the_file(bad: dict[str, Path], tmp_path: Path) -> None:
    config = tmp_path / "signoff.yaml"
    config.write_text(f"version: 1\nstore: sqlite:///{bad['corrupt']}\ntools: {{}}\n")
    result = runner.invoke(app, ["pending", "--config", str(config), "--json"])
    assert result.exit_code == 1
    assert str(bad["corrupt"]) in result.stderr and len(result.stderr.splitlines()) == 1
    assert json.loads(result.stdout)["error"] == "store_unavailable"


def test_serve_shows_a_bad_channels_section_like_policy_check(tmp_path: Path) -> None:
    config = tmp_path / "signoff.yaml"
    config.write_text(
        "version: 1\nstore: sqlite:///x.db\ntools: {}\n"
        "channels:\n  slack: {bot_token: xoxb-inline-secret, signing_secret: abc}\n"
    )
    served = runner.invoke(app, ["serve", "--config", str(config), "--port", "0"])
    checked = runner.invoke(app, ["policy", "check", "--config", str(config)])
    assert served.exit_code == checked.exit_code == 2
    assert "channels.slack.bot_token" in served.stderr
    assert served.stderr == checked.stderr
    assert "Traceback" not in served.output


def test_policy_explain_refuses_absurdly_deep_args_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "signoff.yaml"
    config.write_text("version: 1\ntools: {t: {default: allow}}\n")
    deep = '{"a":' * 10_000 + "1" + "}" * 10_000
    huge = '{"a": ' + "9" * 5000 + "}"
    for value in (deep, huge):
        result = runner.invoke(
            app, ["policy", "explain", "--tool", "t", "--args", value, "--config", str(config)]
        )
        assert result.exit_code == 2
        assert result.stderr.startswith("error: --args") and len(result.stderr.splitlines()) == 1


def test_error_text_is_never_read_as_markup(bad: dict[str, Path], tmp_path: Path) -> None:
    config = tmp_path / "signoff.yaml"
    config.write_text("version: 1\nstore: memory://\ntools: {}\n")
    result = runner.invoke(app, ["show", "req_[bold]x[/]", "--config", str(config)])
    assert result.exit_code == 1 and "req_[bold]x[/]" in result.stderr
