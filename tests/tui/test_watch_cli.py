"""``signoff watch``'s bad inputs: each refused with a line naming what to do (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from signoff.cli import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SIGNOFF_APPROVER_TOKEN", raising=False)


def watch(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["watch", *args], env={"COLUMNS": "250"})
    return result.exit_code, result.output


def test_local_mode_needs_as(config: Path) -> None:
    code, out = watch("--config", str(config))
    assert code == 2 and "say who decides with --as NAME" in out


def test_server_mode_refuses_as(config: Path) -> None:
    code, out = watch("--server", "http://127.0.0.1:9", "--as", "bob", "--token", "t")
    assert code == 2 and "--as is not accepted when deciding through a server" in out


def test_server_mode_needs_a_token(config: Path) -> None:
    code, out = watch("--server", "http://127.0.0.1:9")
    assert code == 2 and "needs an approver token" in out


def test_server_url_is_checked(config: Path) -> None:
    code, out = watch("--server", "ftp://example", "--token", "t")
    assert code == 2 and "--server: expected an http:// or https:// URL" in out


def test_an_invalid_policy_names_the_problem(config: Path) -> None:
    config.write_text("version: 1\ntools: {x: {default: maybe}}\n")
    code, out = watch("--config", str(config), "--as", "bob")
    assert code == 2 and "tools.x" in out


def test_the_core_and_the_cli_never_import_textual() -> None:
    import subprocess
    import sys

    code = (
        "import sys, signoff, signoff.cli, signoff.channels.registry; "
        "assert 'textual' not in sys.modules and 'signoff.tui' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_without_the_tui_extra_it_says_which_to_install(config: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['textual'] = None  # as if signoff[tui] were not installed\n"
        "from signoff.cli import app\n"
        "app(['watch', '--config', sys.argv[1], '--as', 'bob'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(config)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert "signoff watch needs the signoff[tui] extra (textual is missing)" in done.stderr
