"""No approval lost (issue: hardening II, item 7): kill -9 an agent while it waits, approve,
restart it — the approved call runs once and nobody is asked again; two live runs never share
one approval."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from signoff import CallContext, Gate, Policy, Principal, StoreError, ToolCall
from signoff.model import utcnow
from signoff.store import AuditQuery, SQLiteStore
from tests.gate.conftest import wait_until

POLICY = """
version: 1
store: sqlite:///signoff.db
gate: {lease: 1}
people:
  bob:  {roles: [ops]}
  erin: {roles: []}
tools:
  deploy:
    default: require_approval
    approvers: {roles: [ops]}
"""
ROOT = Path(__file__).resolve().parents[2]


def start_agent(config: Path, out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.gate.reattach_agent", str(config), str(out)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_a_restarted_agent_runs_the_call_approved_while_it_was_dead(tmp_path: Path) -> None:
    config = tmp_path / "signoff.yaml"
    config.write_text(textwrap.dedent(POLICY))
    out = tmp_path / "ran.txt"
    gate = Gate.from_config(config)
    assert isinstance(gate, Gate)
    try:
        first = start_agent(config, out)
        pending = wait_until(lambda: gate.run_sync(gate.alist(status="pending")))
        assert isinstance(pending, list)
        request_id = pending[0].id
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        gate.decide(request_id, [{"type": "approve"}], approver="bob")
        # the dead agent's lease lapses (gate.lease: 1s); no renewal can come any more
        wait_until(lambda: gate.run_sync(gate.get(request_id)).lease_until < utcnow())
        second = start_agent(config, out)
        stdout, stderr = second.communicate(timeout=60)
        assert second.returncode == 0, stderr
        assert stdout.strip() == "deployed 1.2"
        assert out.read_text() == "ran 1.2\n"  # ran once, by the restarted agent
        assert len(gate.run_sync(gate.alist())) == 1  # nobody was asked again
        events = [e.event for e in gate.run_sync(gate.store.read_audit(AuditQuery()))]
        assert "reattached" in events and events.count("executed") == 1
    finally:
        gate.close()


def test_two_live_runs_never_share_one_approval(tmp_path: Path) -> None:
    policy = Policy.from_yaml(textwrap.dedent(POLICY.replace("gate: {lease: 1}", "")))
    first = Gate(policy, SQLiteStore(tmp_path / "s.db"))
    second = Gate(policy, SQLiteStore(tmp_path / "s.db"))
    ctx = CallContext(principal=Principal("erin"), agent="billing-bot", thread="t-1")
    call = {"version": "1.2"}
    try:
        one = first.submit([ToolCall("deploy", call)], ctx)
        assert one.request is not None

        def wait() -> None:
            with contextlib.suppress(StoreError):  # the gate closes under it at the end
                first.wait(one.request.id, 5.0)

        waiting = threading.Thread(target=wait, daemon=True)
        waiting.start()
        two = second.submit([ToolCall("deploy", call)], ctx)  # first step of this process too
        assert one.request is not None and two.request is not None
        assert two.request.id != one.request.id and not two.reattached
    finally:
        first.close()
        second.close()
