"""The command line with a poison row in the store (issue 11, item 1): ``pending``, ``audit
verify`` and ``db check`` keep working, ``show`` explains it, ``cancel`` closes it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from signoff.cli import app
from signoff.store import SQLiteStore
from tests.store.factories import created_events, make_request

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture
def seeded(tmp_path: Path) -> tuple[Path, str, str]:
    """(config, good request id, poisoned request id): the poisoned one is due already."""
    path = tmp_path / "signoff.db"
    config = tmp_path / "signoff.yaml"
    config.write_text(f"version: 1\nstore: sqlite:///{path}\ntools: {{}}\n")
    good = make_request(thread="t-good")
    bad = make_request(thread="t-bad", timeout_s=-5)
    for _ in range(250):
        bad.attrs = {"a": bad.attrs}

    async def seed() -> None:
        async with SQLiteStore(path) as store:
            for request in (good, bad):
                await store.create_request(request, created_events(request))

    asyncio.run(seed())
    return config, good.id, bad.id


def test_pending_and_audit_verify_work_past_a_poison_row(seeded: tuple[Path, str, str]) -> None:
    config, good, _ = seeded
    code, output = invoke("pending", "--config", str(config), "--json")
    assert code == 0, output
    assert [r["id"] for r in json.loads(output)] == [good]
    code, output = invoke("audit", "verify", "--config", str(config))
    assert code == 0, output


def test_show_explains_a_quarantined_request(seeded: tuple[Path, str, str]) -> None:
    config, _, bad = seeded
    code, output = invoke("show", bad, "--config", str(config))
    assert code == 1
    flat = " ".join(output.split())
    assert f"request {bad} cannot be read" in flat and "recursion" in flat
    assert f"it is quarantined; `signoff cancel {bad}` closes it" in flat
    code, output = invoke("show", bad, "--config", str(config), "--json")
    assert code == 1
    report = json.loads(output)
    assert (report["id"], report["quarantined"], report["status"]) == (bad, True, "pending")


def test_cancel_closes_a_quarantined_request(seeded: tuple[Path, str, str]) -> None:
    config, _, bad = seeded
    code, output = invoke("db", "check", "--config", str(config))
    assert code == 1 and bad in output
    code, output = invoke("cancel", bad, "--config", str(config), "--as", "ops", "-m", "poison")
    assert code == 0, output
    assert f"cancelled {bad}" in output
    code, output = invoke("show", bad, "--config", str(config))
    assert code == 1 and "already cancelled" in output
    code, output = invoke("cancel", bad, "--config", str(config), "--json")
    assert code == 0 and json.loads(output)["status"] == "cancelled"
    code, output = invoke("db", "check", "--config", str(config))
    assert code == 0, output
    code, output = invoke("audit", "export", "--config", str(config), "--format", "jsonl")
    assert code == 0, output
    events = [json.loads(line) for line in output.splitlines() if line.strip()]
    mine = [(e["event"], e["actor"]) for e in events if e["request_id"] == bad]
    assert mine == [("created", None), ("quarantined", "signoff"), ("cancelled", "ops")]
