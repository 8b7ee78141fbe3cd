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
