"""``signoff audit verify [--anchors] [--expect-head] [--json]`` and ``signoff audit anchor``
(the sidecar), against a SQLite store."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from signoff.audit import read_checkpoints, signature_ok
from signoff.cli import app
from signoff.model import AuditEvent
from signoff.store import SQLiteStore
from tests.store.factories import created_events, decide, decision, make_request

KEY = "0123456789abcdef0123456789abcdef"
CONFIG = """version: 1
store: sqlite:///signoff.db
audit:
  key: ${SIGNOFF_AUDIT_KEY}
  anchor: file:anchors.jsonl
tools: {}
"""
runner = CliRunner()


@pytest.fixture(autouse=True)
def audit_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_AUDIT_KEY", KEY)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "signoff.yaml"
    path.write_text(CONFIG)
    return path


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


async def _seed(db: Path) -> str:
    """One approved and one rejected request, and an allowed call; returns the rejected id."""
    async with SQLiteStore(db) as store:
        ok = make_request(thread="t-ok")
        await store.create_request(ok, created_events(ok))
        await decide(store, ok.id, decision(approver="alice"))
        no = make_request(thread="t-no")
        await store.create_request(no, created_events(no))
        await decide(store, no.id, decision(type="reject", approver="bob", message="no"))
        await store.append_audit([AuditEvent(event="allowed", tool="get_price")])
        return no.id


def seed(config: Path) -> str:
    return asyncio.run(_seed(config.parent / "signoff.db"))


def head(config: Path) -> tuple[int, str]:
    with sqlite3.connect(config.parent / "signoff.db") as db:
        seq, digest = db.execute("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
    return int(seq), str(digest)


def test_anchor_once_then_verify_reports_head_and_checkpoints(config: Path) -> None:
    seed(config)
    code, output = invoke("audit", "anchor", "--once", "--config", str(config))
    assert code == 0, output
    seq, digest = head(config)
    assert f"last: seq {seq} {digest}" in output
    ((_, checkpoint),), bad = read_checkpoints(config.parent / "anchors.jsonl")
    assert not bad and (checkpoint.seq, checkpoint.hash) == (seq, digest)
    assert signature_ok(KEY.encode(), checkpoint)

    code, output = invoke("audit", "verify", "--config", str(config))
    assert code == 0, output
    assert f"audit log head: seq {seq}, hash {digest}" in output
    assert "signatures verified; anchored up to seq" in output and "audit log intact" in output

    code, output = invoke("audit", "verify", "--config", str(config), "--json")
    report = json.loads(output)
    assert code == 0 and report["ok"] and report["head"] == {"seq": seq, "hash": digest}
    assert report["checkpoints"]["signatures"] == "verified"
    assert report["checkpoints"]["anchored_seq"] == seq
    assert report["requests"] == {"checked": 2}
    assert report["anchors"] == str(config.parent / "anchors.jsonl")


def test_verify_names_a_flipped_request_and_exits_1(config: Path) -> None:
    rejected = seed(config)
    invoke("audit", "anchor", "--once", "--config", str(config))
    with sqlite3.connect(config.parent / "signoff.db") as db:
        db.execute(
            "UPDATE requests SET doc = json_set(doc, '$.calls[0].resolution', 'approved') "
            "WHERE id = ?",
            (rejected,),
        )
    code, output = invoke("audit", "verify", "--config", str(config), "--json")
    report = json.loads(output)
    assert code == 1 and not report["ok"]
    assert [(f["kind"], f["request_id"]) for f in report["findings"]] == [("request", rejected)]
    code, output = invoke("audit", "verify", "--config", str(config))
    assert code == 1 and rejected in output and "approved in the requests table" in output


def test_expect_head(config: Path) -> None:
    seed(config)
    invoke("audit", "anchor", "--once", "--config", str(config))
    seq, digest = head(config)
    assert invoke("audit", "verify", "-c", str(config), "--expect-head", f"{seq}:{digest}")[0] == 0
    code, output = invoke(
        "audit", "verify", "-c", str(config), "--expect-head", f"{seq + 5}:{digest}"
    )
    assert code == 1 and f"expected row {seq + 5}, but the log ends at seq {seq}" in output
    code, output = invoke("audit", "verify", "-c", str(config), "--expect-head", "12")
    assert code == 2 and "SEQ:HASH" in output


def test_a_missing_checkpoint_file_is_a_finding_unless_named_explicitly(config: Path) -> None:
    seed(config)
    code, output = invoke("audit", "verify", "--config", str(config))
    assert code == 1 and "no checkpoint file at" in output and "deleted" in output
    code, output = invoke(
        "audit", "verify", "--config", str(config), "--anchors", str(config.parent / "x.jsonl")
    )
    assert code == 2 and "no checkpoint file" in output


def test_verify_without_an_audit_section_warns_that_rewrites_go_unseen(tmp_path: Path) -> None:
    config = tmp_path / "signoff.yaml"
    config.write_text("version: 1\nstore: sqlite:///signoff.db\ntools: {}\n")
    seed(config)
    code, output = invoke("audit", "verify", "--config", str(config))
    assert code == 0, output
    assert "no checkpoints" in output and "rebuilt" in output


def test_anchor_needs_a_key_and_a_sink(tmp_path: Path) -> None:
    config = tmp_path / "signoff.yaml"
    config.write_text("version: 1\nstore: sqlite:///signoff.db\ntools: {}\n")
    code, output = invoke("audit", "anchor", "--once", "--config", str(config))
    assert code == 2 and "audit.key is not set" in output
    config.write_text(
        "version: 1\nstore: sqlite:///signoff.db\naudit: {key: '${SIGNOFF_AUDIT_KEY}'}\n"
    )
    code, output = invoke("audit", "anchor", "--once", "--config", str(config))
    assert code == 2 and "no sink" in output
    code, output = invoke("audit", "anchor", "--once", "-c", str(config), "--to", "ftp://x")
    assert code == 2 and "--to" in output
    code, output = invoke(
        "audit", "anchor", "-c", str(config), "--to", "file:a.jsonl", "--interval", "soon"
    )
    assert code == 2 and "--interval" in output


def test_an_inline_key_is_refused_with_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "signoff.yaml"
    config.write_text(f"version: 1\nstore: sqlite:///signoff.db\naudit: {{key: {KEY}}}\n")
    code, output = invoke("audit", "verify", "--config", str(config))
    assert code == 2 and "never inline" in output


@pytest.mark.slow
def test_the_sidecar_checkpoints_changes_and_once_more_on_sigterm(config: Path) -> None:
    seed(config)
    anchors = config.parent / "anchors.jsonl"
    sidecar = subprocess.Popen(
        [
            *(sys.executable, "-m", "signoff", "audit", "anchor", "-c", str(config)),
            *("--interval", "0.2s", "--signer", "sidecar-1"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "SIGNOFF_AUDIT_KEY": KEY},
    )
    try:
        wait_for_checkpoint(anchors, head(config)[0], sidecar)
        asyncio.run(_more_events(config.parent / "signoff.db", 3))
        wait_for_checkpoint(anchors, head(config)[0], sidecar)
        asyncio.run(_more_events(config.parent / "signoff.db", 1))
        sidecar.send_signal(signal.SIGTERM)
        assert sidecar.wait(timeout=20) == 0
    finally:
        if sidecar.poll() is None:
            sidecar.kill()
    output = sidecar.stdout.read() if sidecar.stdout else ""
    checkpoints = [cp for _, cp in read_checkpoints(anchors)[0]]
    assert (checkpoints[-1].seq, checkpoints[-1].hash) == head(config), output
    assert {cp.signer for cp in checkpoints} == {"sidecar-1"}
    assert invoke("audit", "verify", "--config", str(config))[0] == 0


async def _more_events(db: Path, n: int) -> None:
    async with SQLiteStore(db) as store:
        await store.append_audit([AuditEvent(event="allowed", tool="t") for _ in range(n)])


def wait_for_checkpoint(path: Path, seq: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while True:  # waiting for another process to write the file
        if path.exists() and any(cp.seq == seq for _, cp in read_checkpoints(path)[0]):
            return
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert time.monotonic() < deadline, f"no checkpoint of seq {seq}"
        time.sleep(0.05)
