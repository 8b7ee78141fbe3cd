"""The runnable example in ``examples/pydantic_ai_app.py`` runs offline, start to finish."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_example_runs_offline() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "pydantic_ai_app.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any("Executed instead: delete_file" in line for line in lines)
    assert any("with reason: keep it" in line for line in lines)
    assert "   agent: done: contents of notes.txt | deleted old/report.pdf" in lines
