"""``signoff serve`` with ``audit.anchor``: each replica writes signed checkpoints of the
audit log while it runs, and a last one at shutdown."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest

from signoff.audit import read_checkpoints, signature_ok, verify_log
from signoff.store import SQLiteStore
from tests.server.conftest import POLICY, start_server

KEY = "0123456789abcdef0123456789abcdef"


async def _head_and_report(db: Path, anchors: Path) -> tuple[tuple[int, str], bool]:
    checkpoints, bad = read_checkpoints(anchors)
    async with SQLiteStore(db) as store:
        report = await verify_log(store, checkpoints=checkpoints, bad_lines=bad, key=KEY.encode())
        return await store.audit_head(), report.ok and report.anchored_seq == report.head_seq


def test_serve_checkpoints_the_log_and_once_more_at_shutdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIGNOFF_AUDIT_KEY", KEY)
    anchors = tmp_path / "anchors.jsonl"
    policy = textwrap.dedent(POLICY) + textwrap.dedent(
        f"""
        audit:
          key: ${{SIGNOFF_AUDIT_KEY}}
          anchor: file://{anchors}
          signer: web-1
        """
    )
    db = tmp_path / "signoff.db"
    server = start_server(SQLiteStore(db), policy)
    try:
        rid = server.pending()
        r = server.client("bob").post(
            f"/v1/requests/{rid}/decisions",
            json={"decisions": [{"tool_call_id": "call_1", "type": "reject", "message": "no"}]},
        )
        assert r.status_code == 200
    finally:
        server.close()  # the last checkpoint is written while the app shuts down

    checkpoints = [cp for _, cp in read_checkpoints(anchors)[0]]
    assert checkpoints and {cp.signer for cp in checkpoints} == {"web-1"}
    assert all(signature_ok(KEY.encode(), cp) for cp in checkpoints)
    head, verified = asyncio.run(_head_and_report(db, anchors))
    assert (checkpoints[-1].seq, checkpoints[-1].hash) == head
    assert verified


def test_serve_without_an_anchor_writes_nothing(tmp_path: Path) -> None:
    server = start_server(SQLiteStore(tmp_path / "signoff.db"))
    try:
        server.pending()
    finally:
        server.close()
    assert not list(tmp_path.glob("*.jsonl"))
