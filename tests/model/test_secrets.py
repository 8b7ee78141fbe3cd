"""The state machine keeps secrets only while a call can still run, and audits every change of
a request row (model/secrets.py, model/resolution.py)."""

from __future__ import annotations

import json
from datetime import timedelta

from signoff.model import utcnow
from signoff.model.resolution import (
    apply_decisions,
    cancel,
    due_transition,
    mark_execution,
    reconcile,
)
from signoff.model.secrets import finished, sealed
from signoff.policy.redact import Redaction, SecretKeys, is_digest
from tests.store.factories import decision, make_request

SEALER = Redaction(SecretKeys(), b"k" * 32)
ARGS = {"api_key": "sk-LIVE-1", "cfg": {"password": "hunter2", "host": "db"}, "n": 1}
LIVE = ("sk-LIVE-1", "hunter2")


def in_clear(value: object) -> list[str]:
    text = json.dumps(value, default=str)
    return [s for s in LIVE if s in text]


def test_a_rejected_call_is_sealed_and_a_pending_one_keeps_its_secrets() -> None:
    req = make_request(
        calls=(("c1", "deploy", dict(ARGS)), ("c2", "deploy", dict(ARGS))), roles=("ops",)
    )
    now = utcnow()
    tr = apply_decisions(
        req, [decision("c1", "reject", message="no")], approver_roles=["ops"], now=now
    )
    new = sealed(tr, SEALER).request
    assert is_digest(new.action_requests[0].args["api_key"])
    assert is_digest(new.calls[0].action.args["cfg"]["password"])
    assert new.calls[0].action.args["cfg"]["host"] == "db"
    assert new.action_requests[1].args == ARGS and new.calls[1].action.args == ARGS  # may run


def test_an_approved_call_keeps_its_secrets_until_it_has_run() -> None:
    req = make_request(calls=(("c1", "deploy", dict(ARGS)),), roles=("ops",))
    now = utcnow()
    approved = sealed(
        apply_decisions(req, [decision("c1")], approver_roles=["ops"], now=now), SEALER
    ).request
    assert approved.calls[0].action.args == ARGS and not finished(approved.calls[0])
    running = sealed(mark_execution(approved, "c1", "executing", now=now), SEALER)
    assert running.request.calls[0].action.args == ARGS
    assert not in_clear(running.events[0].data) and is_digest(
        running.events[0].data["args"]["api_key"]
    )
    assert running.events[0].data["args_digest"].startswith("hmac-sha256:")
    done = sealed(mark_execution(running.request, "c1", "executed", now=now), SEALER).request
    assert not in_clear(done.model_dump(mode="json"))


def test_an_interrupted_call_is_sealed_once_reconciled() -> None:
    req = make_request(calls=(("c1", "deploy", dict(ARGS)),), roles=("ops",))
    now = utcnow() - timedelta(hours=1)
    req = apply_decisions(req, [decision("c1")], approver_roles=["ops"], now=now).request
    req = mark_execution(req, "c1", "executing", now=now).request
    tr = reconcile(
        req, "c1", "failed", actor="alice", message="it died", now=utcnow(),
        interrupted_before=utcnow(),
    )  # fmt: skip
    assert not in_clear(sealed(tr, SEALER).request.model_dump(mode="json"))


def test_expired_and_cancelled_requests_are_sealed_attrs_included() -> None:
    req = make_request(calls=(("c1", "deploy", dict(ARGS)),), timeout_s=1)
    req.attrs = {"session": "cookie-value", "ticket": "T-1"}
    expired = due_transition(req, req.expires_at + timedelta(seconds=1))
    assert expired is not None
    doc = sealed(expired, SEALER).request.model_dump(mode="json")
    assert not in_clear(doc) and "cookie-value" not in json.dumps(doc)
    assert doc["attrs"]["ticket"] == "T-1"
    gone = sealed(cancel(req, actor="bot", reason=None, now=utcnow()), SEALER).request
    assert not in_clear(gone.model_dump(mode="json"))


def test_an_edit_is_audited_redacted_and_its_proposal_sealed_when_rejected() -> None:
    req = make_request(calls=(("c1", "deploy", dict(ARGS)),), roles=("ops",), quorum=2)
    now = utcnow()
    edited = {**ARGS, "n": 2}
    tr = sealed(
        apply_decisions(
            req, [decision("c1", "edit", edited_args=edited, name="deploy")],
            approver_roles=["ops"], now=now,
        ),
        SEALER,
    )  # fmt: skip
    [event] = tr.events
    assert event.event == "decided" and event.data["edited_args"]["n"] == 2
    assert not in_clear(event.data) and event.data["edited_args_digest"].startswith("hmac")
    assert tr.request.decisions[0].edited_action is not None
    assert tr.request.decisions[0].edited_action.args == edited  # quorum 2: may still run
    rejected = sealed(
        apply_decisions(
            tr.request, [decision("c1", "reject", "bob")], approver_roles=["ops"], now=now
        ),
        SEALER,
    ).request
    assert not in_clear(rejected.model_dump(mode="json"))


def test_a_repeated_approve_with_a_new_message_is_audited() -> None:
    req = make_request(calls=(("c1", "deploy", {"n": 1}),), roles=("ops",), quorum=2)
    now = utcnow()
    first = apply_decisions(req, [decision("c1", message="ok")], approver_roles=["ops"], now=now)
    again = apply_decisions(
        first.request, [decision("c1", message="still ok")], approver_roles=["ops"], now=now
    )
    assert again.changed and [e.event for e in again.events] == ["decided"]
    assert again.events[0].data["counted"] is False and again.events[0].data["quorum"] == "1/2"
    assert again.request.calls[0].approvals == ["alice"]
    repeat = apply_decisions(
        again.request, [decision("c1", message="still ok")], approver_roles=["ops"], now=now
    )
    assert not repeat.changed and not repeat.events  # an exact repeat stays a no-op


def test_an_approve_after_ones_own_edit_is_audited() -> None:
    req = make_request(calls=(("c1", "deploy", {"n": 1}),), roles=("ops",), quorum=2)
    now = utcnow()
    edit = decision("c1", "edit", edited_args={"n": 2}, name="deploy")
    edited = apply_decisions(req, [edit], approver_roles=["ops"], now=now)
    approve = apply_decisions(edited.request, [decision("c1")], approver_roles=["ops"], now=now)
    assert approve.changed and [e.event for e in approve.events] == ["decided"]
    assert approve.events[0].data["counted"] is False
    assert len(approve.request.decisions) == 2 and approve.request.pending
