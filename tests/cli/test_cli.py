"""The ``signoff`` command line, run as a real subprocess where processes matter."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from signoff.cli import app

POLICY = """
version: 1
store: sqlite:///signoff.db
people:
  alice: {roles: [finance]}
  bob:   {roles: [finance]}
  erin:  {}
tools:
  transfer_funds:
    description: "Transfer {args.amount} to {args.to}"
    default: allow
    allowed_decisions: [approve, edit, reject]
    editable_args: [amount]
    rules:
      - id: large-transfer
        when: {args.amount: {gt: 10000}}
        decision: require_approval
        approvers: {roles: [finance]}
        timeout: 10m
"""

AGENT = """
import sys
from signoff import Gate, Rejected

gate = Gate.from_config(sys.argv[1])

@gate.guard
def transfer_funds(amount: int, to: str) -> str:
    return f"sent {amount} to {to}"

with gate.context(principal="erin", thread="t-1", user_request="pay ACME"):
    try:
        print("RESULT", transfer_funds(amount=int(sys.argv[2]), to="ACME"), flush=True)
    except Rejected as exc:
        print("REJECTED", exc, flush=True)
gate.close()
"""

runner = CliRunner()


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "signoff.yaml"
    path.write_text(textwrap.dedent(POLICY))
    return path


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "signoff", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def wait_for_pending(config: Path) -> dict[str, object]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        code, output = invoke("pending", "--config", str(config), "--json")
        assert code == 0, output
        reqs = json.loads(output)
        if reqs:
            return dict(reqs[0])
        time.sleep(0.05)
    raise AssertionError("no pending request appeared")


def start_agent(tmp_path: Path, config: Path, amount: int) -> subprocess.Popen[str]:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    return subprocess.Popen(
        [sys.executable, str(script), str(config), str(amount)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def test_policy_check_accepts_a_valid_file(config: Path) -> None:
    code, output = invoke("policy", "check", "--config", str(config))
    assert code == 0, output
    assert "valid" in output


def test_policy_check_lists_every_error_with_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "signoff.yaml"
    bad.write_text(
        "version: 1\ntools:\n  t:\n    rules:\n      - id: a\n        when: "
        "{args.x: {gt_: 1}}\n        decision: allow\n"
    )
    code, output = invoke("policy", "check", "--config", str(bad), "--json")
    assert code == 2
    errors = json.loads(output)["errors"]
    assert any("gt_" in e and "line" in e for e in errors)


def test_policy_explain_shows_rule_and_approvers(config: Path) -> None:
    code, output = invoke(
        "policy",
        "explain",
        "--config",
        str(config),
        "--tool",
        "transfer_funds",
        "--args",
        '{"amount": 50000, "to": "ACME"}',
        "--principal",
        "erin",
        "--json",
    )
    assert code == 0, output
    data = json.loads(output)
    assert "large-transfer" in json.dumps(data)
    assert "require_approval" in json.dumps(data)


def test_policy_test_runs_cases_and_fails_on_a_wrong_expectation(
    config: Path, tmp_path: Path
) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text(
        textwrap.dedent("""
        cases:
          - name: small transfers run
            tool: transfer_funds
            args: {amount: 5, to: ACME}
            expect: {verdict: allow}
          - name: large transfers need finance
            tool: transfer_funds
            args: {amount: 50000, to: ACME}
            expect: {verdict: require_approval, rule: large-transfer}
    """)
    )
    code, output = invoke("policy", "test", str(cases), "--config", str(config))
    assert code == 0, output
    cases.write_text(cases.read_text().replace("verdict: allow", "verdict: deny"))
    code, output = invoke("policy", "test", str(cases), "--config", str(config))
    assert code == 1
    assert "1 failed" in output


def test_cli_approval_wakes_an_agent_in_another_process(config: Path, tmp_path: Path) -> None:
    agent = start_agent(tmp_path, config, 50_000)
    try:
        req = wait_for_pending(config)
        code, output = invoke("show", str(req["id"]), "--config", str(config))
        assert code == 0 and "large-transfer" in output and "pay ACME" in output
        result = cli(
            "approve", str(req["id"]), "--as", "alice", "-m", "checked", "--config", str(config)
        )
        assert result.returncode == 0, result.stderr
        out, err = agent.communicate(timeout=30)
        assert "RESULT sent 50000 to ACME" in out, err
    finally:
        agent.kill()


def test_cli_edit_changes_what_runs(config: Path, tmp_path: Path) -> None:
    agent = start_agent(tmp_path, config, 50_000)
    try:
        req = wait_for_pending(config)
        call_id = req["calls"][0]["tool_call_id"]  # type: ignore[index]
        code, output = invoke(
            "edit",
            str(req["id"]),
            "--as",
            "bob",
            "--call",
            call_id,
            "--args",
            '{"amount": 40000}',
            "--config",
            str(config),
        )
        assert code == 0, output
        out, _ = agent.communicate(timeout=30)
        assert "RESULT sent 40000 to ACME" in out
    finally:
        agent.kill()


def test_cli_reject_reaches_the_agent_with_the_reason(config: Path, tmp_path: Path) -> None:
    agent = start_agent(tmp_path, config, 50_000)
    try:
        req = wait_for_pending(config)
        code, output = invoke(
            "reject",
            str(req["id"]),
            "--as",
            "alice",
            "-m",
            "wrong account",
            "--config",
            str(config),
        )
        assert code == 0, output
        out, _ = agent.communicate(timeout=30)
        assert "REJECTED" in out and "wrong account" in out
    finally:
        agent.kill()


def test_cli_refuses_unknown_people_and_late_decisions(config: Path, tmp_path: Path) -> None:
    agent = start_agent(tmp_path, config, 50_000)
    try:
        req = wait_for_pending(config)
        rid = str(req["id"])
        code, output = invoke("approve", rid, "--as", "mallory", "--config", str(config))
        assert code == 1 and "not in the people" in output
        code, output = invoke("approve", rid, "--as", "erin", "--config", str(config))
        assert code == 1
        assert invoke("approve", rid, "--as", "alice", "--config", str(config))[0] == 0
        code, output = invoke("reject", rid, "--as", "bob", "-m", "late", "--config", str(config))
        assert code == 1 and "alice" in output
    finally:
        agent.communicate(timeout=30)
        agent.kill()


def test_reject_requires_a_reason(config: Path) -> None:
    code, _output = invoke("reject", "req_x", "--as", "alice", "--config", str(config))
    assert code == 2


def test_audit_verify_detects_a_tampered_row(config: Path, tmp_path: Path) -> None:
    agent = start_agent(tmp_path, config, 5)  # allowed: audited via the batched writer
    agent.communicate(timeout=30)
    code, output = invoke("audit", "verify", "--config", str(config))
    assert code == 0, output
    db = sqlite3.connect(tmp_path / "signoff.db")
    triggers = db.execute(
        "SELECT name, sql FROM sqlite_master WHERE type='trigger' AND tbl_name='audit'"
    ).fetchall()
    for name, _sql in triggers:
        db.execute(f'DROP TRIGGER "{name}"')
    db.execute("UPDATE audit SET actor='mallory' WHERE seq = (SELECT MIN(seq) FROM audit)")
    for _name, sql in triggers:
        db.execute(sql)
    db.commit()
    db.close()
    code, output = invoke("audit", "verify", "--config", str(config))
    assert code == 1 and "broken" in output


def test_audit_export_writes_jsonl_and_csv(config: Path, tmp_path: Path) -> None:
    agent = start_agent(tmp_path, config, 5)
    agent.communicate(timeout=30)
    result = cli("audit", "export", "--format", "jsonl", "--config", str(config))
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert rows and rows[0]["event"] == "allowed" and rows[0]["hash"]
    out = tmp_path / "audit.csv"
    result = cli("audit", "export", "--format", "csv", "-o", str(out), "--config", str(config))
    assert result.returncode == 0 and out.read_text().startswith("seq,")


def test_missing_config_is_a_clear_error(tmp_path: Path) -> None:
    code, output = invoke("pending", "--config", str(tmp_path / "nope.yaml"))
    assert code == 2 and "no policy file" in output


@pytest.mark.slow
def test_demo_runs_to_completion_without_a_terminal(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "120"}
    result = subprocess.run(
        [sys.executable, "-m", "signoff", "demo", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "super-admin" in out  # the protected row was denied
    assert "ran get_stock_price" in out
    assert "not today" in out  # a rejection reached the agent
    assert '"amount": 25' in out  # an edit ran with the edited amount
    assert "rm -rf dist" in out


def test_policy_check_reports_bad_channel_and_server_sections(tmp_path: Path) -> None:
    path = tmp_path / "signoff.yaml"
    path.write_text(
        textwrap.dedent(POLICY)
        + "channels:\n  slack: {bot_token: xoxb-inline-secret, signing_secret: abc}\n"
    )
    code, output = invoke("policy", "check", "--config", str(path), "--json")
    assert code == 2
    assert "channels.slack" in output
    path.write_text(textwrap.dedent(POLICY) + "serve: {port: not-a-port}\n")
    code, output = invoke("policy", "check", "--config", str(path), "--json")
    assert code == 2 and "serve.port" in output


def test_serve_never_prints_a_store_password() -> None:
    from signoff.cli.server_commands import _redacted_url

    assert _redacted_url("postgresql://app:s3cret@db:5432/signoff") == (
        "postgresql://app:***@db:5432/signoff"
    )
    assert _redacted_url("sqlite:///x.db") == "sqlite:///x.db"


@pytest.mark.slow
def test_demo_non_interactive_rejects_every_approval_at_once(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "signoff", "demo", "--non-interactive", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no human is available" in result.stdout
    assert "ran get_stock_price" in result.stdout  # allowed calls still run


def test_init_writes_a_starter_policy_that_checks_clean(tmp_path: Path) -> None:
    path = tmp_path / "signoff.yaml"
    code, output = invoke("init", str(path))
    assert code == 0, output
    code, output = invoke("policy", "check", "--config", str(path), "--json")
    assert code == 0, output
    assert json.loads(output)["warnings"] == []
    assert invoke("init", str(path))[0] == 2  # never overwrites without --force


def test_pending_table_never_shortens_the_request_id(config: Path, tmp_path: Path) -> None:
    agent = start_agent(tmp_path, config, 50_000)
    try:
        req = wait_for_pending(config)
        result = subprocess.run(
            [sys.executable, "-m", "signoff", "pending", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "COLUMNS": "60"},
        )
        assert str(req["id"]) in result.stdout  # copyable into `signoff approve`
    finally:
        agent.kill()
