"""The CLI shows an approval chain: ``pending`` and ``show`` print the stage and its
progress, ``approve`` says what the chain waits for next, ``policy explain`` prints it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from typer.testing import CliRunner

from signoff import CallContext, Gate, Policy, Principal, ToolCall
from signoff.cli import app

POLICY = """
version: 1
store: sqlite:///{db}
people:
  mia:  {roles: [manager]}
  fay:  {roles: [finance]}
  fred: {roles: [finance]}
  erin: {roles: []}
tools:
  pay_invoice:
    default: require_approval
    approvers:
      stages: [{roles: [manager]}, {roles: [finance], quorum: 2, timeout: 30m}]
"""


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner(env={"COLUMNS": "240"}).invoke(app, list(args))
    return result.exit_code, result.output


def setup(tmp_path: Path) -> tuple[str, str]:
    config = tmp_path / "signoff.yaml"
    config.write_text(textwrap.dedent(POLICY).replace("{db}", str(tmp_path / "s.db")))
    with Gate(Policy.load(config)) as gate:
        ctx = CallContext(principal=Principal("erin"), thread="t")
        sub = gate.submit([ToolCall("pay_invoice", {"amount": 10}, id="c1")], ctx)
        assert sub.request is not None
        return str(config), sub.request.id


def test_pending_show_and_approve_print_the_stage(tmp_path: Path) -> None:
    config, rid = setup(tmp_path)
    code, output = invoke("pending", "--config", config)
    assert code == 0, output
    assert "stage 1 of 2" in output
    code, output = invoke("show", rid, "--config", config)
    assert code == 0, output
    assert "chain (stage 1: manager; stage 2: 2 of finance)" in output
    assert "progress: stage 1 of 2: 0 of 1 manager approval" in output
    code, output = invoke("approve", rid, "--as", "fay", "--config", config)
    assert code != 0 and "stage 1 of 2" in output
    code, output = invoke("approve", rid, "--as", "mia", "--config", config)
    assert code == 0, output
    assert "stage 2 of 2: 0 of 2 finance approvals — waiting for more approvers" in output
    code, output = invoke("show", rid, "--config", config, "--json")
    assert json.loads(output)["calls"][0]["group_approvals"] == [["mia"], []]


def test_policy_explain_prints_the_chain(tmp_path: Path) -> None:
    config, _ = setup(tmp_path)
    code, output = invoke("policy", "explain", "--config", config, "--tool", "pay_invoice")
    assert code == 0, output
    assert "approval chain: 2 stages, one after the other (a person counts once):" in output
    assert "stage 2: 2 of role finance; deadline 1800s after it starts, on_timeout reject" in output
