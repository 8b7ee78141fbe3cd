"""The runnable examples stay runnable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_guarded_function_example_runs_to_completion() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "guarded_function.py")],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    assert "denied:" in result.stdout and "protect-super-admin" in result.stdout
    assert "sent 50000 EUR to ACME" in result.stdout
    assert "audit log: intact" in result.stdout


def test_example_policy_passes_its_own_cases() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "signoff",
            "policy",
            "test",
            str(ROOT / "examples" / "policy_cases.yaml"),
            "--config",
            str(ROOT / "examples" / "signoff.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_non_interactive_shell_example_runs_only_allow_listed_commands() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "non_interactive_shell.py")],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("ran {'command': 'ls && cat notes.txt | wc -l'}")
    assert "part 1 (`rm notes.txt`) does not start with an allowed command" in lines[1]
    assert "it contains a redirect `>`" in lines[2]
    assert lines[3].startswith("refused {'file_path'") and "no human is available" in lines[3]
    assert lines[4] == "files: ['notes.txt']"


def test_inquiry_fallback_example_is_answered_by_the_judge() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "inquiry_fallback.py")],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("asked req_") and lines[0].endswith("nobody answers…")
    assert lines[1] == "answer: 'eu', by judge:regions (a model, not a human)"
