"""Secrets through ``@gate.guard`` and decisions: audited redacted, never editable, always the
agent's own value when an edited call runs; the request row sealed once the call finished."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from signoff import DecisionError, Denied, Gate, Rejected, ToolCall
from signoff.policy.redact import REDACTED, is_digest
from signoff.store import AuditQuery, SQLiteStore
from tests.gate.conftest import make_policy, next_pending

POLICY = """
version: 1
people:
  alice: {roles: [ops]}
  bob: {roles: [ops]}
  erin: {roles: []}
tools:
  lookup:
    default: allow
    rules:
      - id: no-prod
        when: {args.env: prod}
        decision: deny
        reason: not in production
  deploy:
    default: require_approval
    approvers: {roles: [ops]}
    allowed_decisions: [approve, edit, reject]
    editable_args: "*"
  pair:
    default: require_approval
    approvers: {roles: [ops], quorum: 2}
    allowed_decisions: [approve, edit, reject]
    editable_args: "*"
"""
LIVE = "sk-LIVE-7d1e9b"
PASSWORD = "hunter2-x9"


@pytest.fixture
def gate(tmp_path: Path) -> Any:
    g = Gate(make_policy(POLICY), SQLiteStore(tmp_path / "s.db"))
    yield g
    g.close()


def audit_rows(gate: Gate, **filters: Any) -> list[Any]:
    async def read() -> list[Any]:
        await gate.store.flush_audit()
        return await gate.store.read_audit(AuditQuery(**filters))

    return gate._portal.run(read())


def file_text(gate: Gate) -> str:
    assert isinstance(gate.store, SQLiteStore)
    gate._portal.run(gate.store.flush_audit())
    with sqlite3.connect(gate.store.path) as conn:
        rows = conn.execute("SELECT doc FROM requests").fetchall()
        rows += conn.execute("SELECT data FROM audit").fetchall()
    return "\n".join(str(r[0]) for r in rows)


def decide_later(gate: Gate, decide: Any) -> threading.Thread:
    """Decide the next pending request from another thread (an approver elsewhere)."""

    def run() -> None:
        decide(next_pending(gate))

    t = threading.Thread(target=run)
    t.start()
    return t


def deploy_tool(gate: Gate, ran: list[dict[str, Any]]) -> Any:
    @gate.guard
    def deploy(version: str, api_key: str, cfg: dict[str, Any]) -> str:
        ran.append({"version": version, "api_key": api_key, "cfg": cfg})
        return "deployed"

    return deploy


def test_allowed_and_denied_calls_are_audited_with_redacted_arguments(gate: Gate) -> None:
    @gate.guard
    def lookup(env: str, token: str, cfg: dict[str, Any]) -> str:
        return "ok"

    assert lookup("dev", LIVE, {"password": PASSWORD}) == "ok"
    with pytest.raises(Denied):
        lookup("prod", LIVE, {"password": PASSWORD})
    allowed, denied = audit_rows(gate, event="allowed") + audit_rows(gate, event="denied")
    for row in (allowed, denied):
        assert row.data["args"]["env"] in ("dev", "prod") and is_digest(row.data["args"]["token"])
        assert is_digest(row.data["args"]["cfg"]["password"])
        assert row.data["args_digest"] == gate.redaction.digest(
            {"env": row.data["args"]["env"], "token": LIVE, "cfg": {"password": PASSWORD}}
        )
    text = file_text(gate)
    assert LIVE not in text and PASSWORD not in text


def test_an_approved_call_runs_with_its_secret_and_is_sealed_afterwards(gate: Gate) -> None:
    ran: list[dict[str, Any]] = []
    deploy = deploy_tool(gate, ran)

    def approve(req: Any) -> None:
        assert req.action_requests[0].args["api_key"] == LIVE  # the window: it may still run
        gate.decide(req.id, [{"type": "approve"}], approver="alice")

    t = decide_later(gate, approve)
    with gate.context(principal="erin"):
        assert deploy("v1", LIVE, {"password": PASSWORD, "host": "a"}) == "deployed"
    t.join()
    assert ran == [{"version": "v1", "api_key": LIVE, "cfg": {"password": PASSWORD, "host": "a"}}]
    text = file_text(gate)
    assert LIVE not in text and PASSWORD not in text
    created = audit_rows(gate, event="created")[0].data["calls"][0]
    assert created["args"]["version"] == "v1" and is_digest(created["args"]["api_key"])


def test_an_edit_sent_back_masked_runs_with_the_agents_own_secrets(gate: Gate) -> None:
    ran: list[dict[str, Any]] = []
    deploy = deploy_tool(gate, ran)

    def edit(req: Any) -> None:
        edited = {"version": "v2", "api_key": REDACTED, "cfg": {"password": REDACTED, "host": "b"}}
        gate.decide(
            req.id,
            [{"type": "edit", "edited_action": {"name": "deploy", "args": edited}}],
            approver="alice",
        )

    t = decide_later(gate, edit)
    with gate.context(principal="erin"):
        deploy("v1", LIVE, {"password": PASSWORD, "host": "a"})
    t.join()
    assert ran == [{"version": "v2", "api_key": LIVE, "cfg": {"password": PASSWORD, "host": "b"}}]
    [decided] = audit_rows(gate, event="decided")
    assert decided.data["edited_args"]["version"] == "v2"
    assert is_digest(decided.data["edited_args"]["api_key"])
    assert decided.data["edited_args_digest"].startswith("hmac-sha256:")
    text = file_text(gate)
    assert LIVE not in text and PASSWORD not in text


@pytest.mark.parametrize(
    ("edited", "field"),
    [
        ({"api_key": "sk-ATTACKER"}, "decisions[0].edited_action.args.api_key"),
        (
            {"cfg": {"password": "changed", "host": "a"}},
            "decisions[0].edited_action.args.cfg.password",
        ),
        ({"cfg": {"host": "a"}}, "decisions[0].edited_action.args.cfg.password"),
        ({"token": "added"}, "decisions[0].edited_action.args.token"),
    ],
)
def test_an_edit_touching_a_secret_is_refused_naming_the_field(
    gate: Gate, edited: dict[str, Any], field: str
) -> None:
    ctx = gate.make_context("erin")
    args = {"version": "v1", "api_key": LIVE, "cfg": {"password": PASSWORD, "host": "a"}}
    sub = gate.submit([ToolCall("deploy", args)], ctx)
    assert sub.request is not None
    decision = {"type": "edit", "edited_action": {"name": "deploy", "args": {**args, **edited}}}
    with pytest.raises(DecisionError) as err:
        gate.decide(sub.request.id, [decision], approver="alice")
    assert err.value.field == field and "never editable" in str(err.value)
    stored = gate._portal.run(gate.get(sub.request.id))
    assert stored.pending and not stored.decisions


def test_a_rejected_call_is_sealed_in_the_sqlite_file(gate: Gate) -> None:
    deploy = deploy_tool(gate, [])
    t = decide_later(
        gate, lambda req: gate.decide(req.id, [{"type": "reject", "message": "no"}], approver="bob")
    )
    with gate.context(principal="erin"), pytest.raises(Rejected):
        deploy("v1", LIVE, {"password": PASSWORD})
    t.join()
    text = file_text(gate)
    assert LIVE not in text and PASSWORD not in text
    digests = json.loads(text.splitlines()[0])["action_requests"][0]["args"]
    assert digests["api_key"] == {"redacted": gate.redaction.digest(LIVE)}


def test_every_decision_that_changes_the_row_is_audited(gate: Gate) -> None:
    ctx = gate.make_context("erin")
    sub = gate.submit([ToolCall("pair", {"n": 1})], ctx)
    assert sub.request is not None
    rid = sub.request.id
    gate.decide(rid, [{"type": "approve", "message": "fine"}], approver="alice")
    gate.decide(rid, [{"type": "approve", "message": "fine"}], approver="alice")  # exact repeat
    gate.decide(rid, [{"type": "approve", "message": "really fine"}], approver="alice")
    edit = {"type": "edit", "edited_action": {"name": "pair", "args": {"n": 2}}}
    gate.decide(rid, [edit], approver="bob")
    gate.decide(rid, [{"type": "approve"}], approver="bob")  # after his own edit
    req = gate._portal.run(gate.get(rid))
    decided = audit_rows(gate, event="decided", request_id=rid)
    assert len(req.decisions) == len(decided) == 4 and req.pending
    assert [r.data.get("counted", True) for r in decided] == [True, False, True, False]
