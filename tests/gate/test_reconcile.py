"""An interrupted execution is shown as such and reconciled by a human, never re-run."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from signoff import CallContext, DecisionError, Gate, NotAuthorized, Policy, Principal, ToolCall
from signoff.cli.main import app
from signoff.model import utcnow
from signoff.store import AuditQuery, SQLiteStore
from tests.gate.conftest import wait_until

POLICY = """
version: 1
store: sqlite:///signoff.db
gate: {execution_timeout: 0.2}
people:
  bob:  {roles: [ops]}
  erin: {roles: []}
tools:
  deploy:
    default: require_approval
    approvers: {roles: [ops]}
"""


def interrupted(gate: Gate) -> tuple[str, str]:
    ctx = CallContext(principal=Principal("erin"), thread="t")
    sub = gate.submit([ToolCall("deploy", {"version": "1"}, id="c1")], ctx)
    assert sub.request is not None
    gate.decide(sub.request.id, [{"type": "approve"}], approver="bob")
    gate.run_sync(gate.aclaim(sub.request.id, "c1"))  # ... and the process dies here
    return sub.request.id, "c1"


def test_a_fresh_claim_cannot_be_reconciled_an_old_one_can(tmp_path: Path) -> None:
    gate = Gate(Policy.from_yaml(textwrap.dedent(POLICY)), SQLiteStore(tmp_path / "s.db"))
    try:
        rid, call = interrupted(gate)
        with pytest.raises(DecisionError) as err:
            gate.reconcile(rid, call, outcome="executed", actor="bob")
        assert "may still be running" in str(err.value)
        started = gate.run_sync(gate.get(rid)).call(call).execution_at
        assert started is not None
        wait_until(lambda: (utcnow() - started).total_seconds() > 0.2)
        with pytest.raises(NotAuthorized):
            gate.reconcile(rid, call, outcome="executed", actor="erin")
        req = gate.reconcile(rid, call, outcome="failed", actor="bob", message="half done")
        assert req.call(call).execution == "failed"
        assert req.call(call).execution_error == "half done"
        with pytest.raises(DecisionError):  # nothing left to reconcile
            gate.reconcile(rid, call, outcome="executed", actor="bob")
        gate.run_sync(gate.store.flush_audit())
        events = gate.run_sync(gate.store.read_audit(AuditQuery(request_id=rid)))
        reconciled = [e for e in events if e.event == "reconciled"]
        assert reconciled and reconciled[0].actor == "bob"
        assert reconciled[0].data == {"outcome": "failed", "message": "half done"}
    finally:
        gate.close()


def test_show_says_running_then_interrupted_and_the_cli_reconciles(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    config = tmp_path / "signoff.yaml"
    config.write_text(textwrap.dedent(POLICY).replace("0.2", "30"))
    gate = Gate.from_config(config)
    assert isinstance(gate, Gate)
    try:
        rid, call = interrupted(gate)
    finally:
        gate.close()
    runner = CliRunner()
    shown = runner.invoke(app, ["show", rid, "--config", str(config)])
    assert "running since" in shown.output and "interrupted" not in shown.output
    config.write_text(textwrap.dedent(POLICY).replace("0.2", "0.001"))
    shown = runner.invoke(app, ["show", rid, "--config", str(config)])
    assert "interrupted" in shown.output and "signoff reconcile" in shown.output
    done = runner.invoke(
        app,
        ["reconcile", rid, "--call", call, "--outcome", "executed", "--as", "bob",
         "-m", "checked the deploy log", "--config", str(config)],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    shown = runner.invoke(app, ["show", rid, "--config", str(config)])
    assert "execution: executed" in shown.output
