"""Local CLI decisions: ``--as`` is required and compared like every name; the OS user who ran
the command is recorded beside ``channel: cli``."""

from __future__ import annotations

import getpass
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from signoff import Gate, Policy, ToolCall
from signoff.cli import app
from signoff.cli.deciding import local_os_user
from signoff.store import AuditQuery

POLICY = """
version: 1
store: sqlite:///signoff.db
people:
  erin:  {roles: [finance]}
  bob:   {roles: [finance]}
  carol: {roles: [finance]}
tools:
  pay:
    default: require_approval
    approvers: {roles: [finance]}
  pay_two:
    default: require_approval
    approvers: {roles: [finance], quorum: 2}
"""

runner = CliRunner()


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "signoff.yaml"
    path.write_text(textwrap.dedent(POLICY))
    return path


@pytest.fixture
def gate(config: Path) -> Iterator[Gate]:
    g = Gate(Policy.load(config))
    yield g
    g.close()


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def submit(gate: Gate, tool: str = "pay", principal: str = "Erin") -> str:
    sub = gate.submit([ToolCall(tool, {"amount": 5}, id="c1")], gate.make_context(principal))
    assert sub.request is not None
    return sub.request.id


def test_the_os_user_is_recorded_beside_channel_cli(gate: Gate, config: Path) -> None:
    rid = submit(gate)
    code, out = invoke("approve", rid, "--as", "bob", "--config", str(config), "--json")
    assert code == 0, out
    decision = json.loads(out)["decisions"][0]
    assert decision["channel"] == "cli"
    assert decision["approver"] == "bob"
    assert decision["os_user"] == getpass.getuser()

    async def decided() -> dict[str, object]:
        await gate.store.flush_audit()
        rows = await gate.store.read_audit(AuditQuery(request_id=rid))
        return next(r.data for r in rows if r.event == "decided")

    assert gate.run_sync(decided())["os_user"] == getpass.getuser()


def test_show_names_the_os_user(gate: Gate, config: Path) -> None:
    rid = submit(gate)
    invoke("reject", rid, "--as", "bob", "-m", "no", "--config", str(config))
    code, out = invoke("show", rid, "--config", str(config))
    assert code == 0, out
    assert f"os user {getpass.getuser()}" in out


def test_a_request_for_Erin_cannot_be_approved_as_erin(gate: Gate, config: Path) -> None:
    rid = submit(gate, principal="Erin")
    code, out = invoke("approve", rid, "--as", "erin", "--config", str(config))
    assert code == 1
    assert "erin made this call (as Erin)" in out and "forbid_self_approval" in out
    assert gate.run_sync(gate.get(rid)).pending


def test_Bob_and_bob_are_one_approver_from_the_cli(gate: Gate, config: Path) -> None:
    rid = submit(gate, "pay_two", principal="frank")
    assert invoke("approve", rid, "--as", "Bob", "--config", str(config))[0] == 0
    code, out = invoke("approve", rid, "--as", "bob", "-m", "again", "--config", str(config))
    assert code == 0, out
    assert "quorum 1/2" in out


def test_local_decisions_need_as(gate: Gate, config: Path) -> None:
    rid = submit(gate)
    code, out = invoke("approve", rid, "--config", str(config), "--json")
    assert code == 2
    assert "--as NAME" in out and "--server" in out
    assert json.loads(out.splitlines()[-1])["error"] == "invalid_input"


def test_local_os_user_survives_a_system_without_one(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_user() -> str:
        raise OSError("no login name")

    monkeypatch.setattr(getpass, "getuser", no_user)
    assert local_os_user() is None
