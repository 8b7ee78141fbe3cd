"""A run that ended with ``DeferredToolRequests`` continues in a new process: the history and
the requests are plain JSON, the approval is in signoff's SQLite store, the tool runs once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from signoff import Gate

ROOT = Path(__file__).resolve().parents[3]
WORKER = "tests.integrations.pydantic_ai.restart_worker"


@pytest.mark.slow
def test_continue_in_a_new_process(policy_file: Path) -> None:
    directory = policy_file.parent
    request_id = json.loads(_worker(directory, "pause").splitlines()[-1])["request_id"]
    with Gate.from_config(policy_file) as gate:  # type: ignore[union-attr]
        gate.decide(request_id, [{"type": "approve"}], approver="alice")
    resumed = _worker(directory, "resume")
    assert json.loads(resumed.splitlines()[-1]) == {"final": "done: deleted tmp/x"}
    assert (directory / "ran.txt").read_text() == "delete_file tmp/x\n"
    with Gate.from_config(policy_file) as gate:  # type: ignore[union-attr]
        assert gate.run_sync(gate.get(request_id)).calls[0].execution == "executed"


def _worker(directory: Path, mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", WORKER, str(directory), mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
