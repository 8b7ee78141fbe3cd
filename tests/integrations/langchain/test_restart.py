"""Pause, kill the process (SIGKILL), start a new one, resume: the approval survives in
signoff's SQLite store, the graph in LangGraph's SqliteSaver, and the tool runs once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from signoff import Gate
from signoff.store import AuditQuery

ROOT = Path(__file__).resolve().parents[3]
WORKER = "tests.integrations.langchain.restart_worker"


def start(directory: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", WORKER, str(directory), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_resume_after_the_process_is_killed(policy_file: Path) -> None:
    directory = policy_file.parent
    first = start(directory, "pause")
    assert first.stdout is not None
    line = first.stdout.readline()
    assert line, first.stderr.read() if first.stderr else "no output"
    request_id = json.loads(line)["request_id"]
    first.kill()  # SIGKILL while paused: nothing gets to clean up
    first.wait(30)

    second = start(directory, "resume", "approve")
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert json.loads(out.splitlines()[-1]) == {"final": "done: deleted tmp/x"}
    assert (directory / "ran.txt").read_text() == "delete_file tmp/x\n"

    with Gate.from_config(policy_file) as gate:  # type: ignore[union-attr]
        req = gate._portal.run(gate.get(request_id))
        assert req.status == "resolved" and req.calls[0].execution == "executed"
        rows = gate._portal.run(gate.store.read_audit(AuditQuery(request_id=request_id)))
        events = [r.event for r in rows]
        assert [e for e in events if e in ("created", "decided", "executing", "executed")] == [
            "created",
            "decided",
            "executing",
            "executed",
        ]


@pytest.mark.slow
@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_resume_in_a_new_process_with_the_default_in_memory_store(
    tmp_path: Path, decision: str
) -> None:
    """The documented swap keeps requests in memory: the new process rebuilds the request
    from the checkpoint (same id), checks it against the policy again, and resumes."""
    first = start(tmp_path, "pause", "approve", "memory")
    assert first.stdout is not None
    line = first.stdout.readline()
    assert line, first.stderr.read() if first.stderr else "no output"
    first.kill()
    first.wait(30)

    second = start(tmp_path, "resume", decision, "memory")
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    final = json.loads(out.splitlines()[-1])["final"]
    if decision == "approve":
        assert final == "done: deleted tmp/x"
        assert (tmp_path / "ran.txt").read_text() == "delete_file tmp/x\n"
    else:
        assert final.startswith("done: User rejected the tool call for `delete_file`")
        assert not (tmp_path / "ran.txt").exists()
