"""The attack of issue 12 (found item 5): an argument ``api_key: sk-LIVE-…`` (and a nested
``cfg.password``) must not appear in clear in the API, the audit log a non-admin approver
reads, the inbox and its edit form, nor in the SQLite file once the call finished; a remote
agent still runs the call with its own real values."""

from __future__ import annotations

import html
import json
import re
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from signoff.client import RemoteGate
from signoff.policy.redact import REDACTED
from signoff.store import SQLiteStore
from tests.server.conftest import POLICY, Server, start_server
from tests.server.test_inbox_forms import csrf_of, form_post, sign_in

LIVE = "sk-LIVE-93c1f0aa"
PASSWORD = "hunter2-cfg"
SECRET_POLICY = (
    POLICY
    + """
  configure:
    default: require_approval
    approvers: {roles: [finance]}
    allowed_decisions: [approve, edit, reject]
    editable_args: "*"
"""
)
ARGS = {"service": "api", "api_key": LIVE, "cfg": {"password": PASSWORD, "host": "db-1"}}


@pytest.fixture
def srv(tmp_path: Path) -> Iterator[Server]:
    server = start_server(SQLiteStore(tmp_path / "signoff.db"), SECRET_POLICY)
    yield server
    server.close()


def ask(srv: Server, call_id: str = "call_1") -> str:
    r = srv.submit([{"id": call_id, "name": "configure", "args": ARGS}])
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def leaks(text: str) -> list[str]:
    return [s for s in (LIVE, PASSWORD) if s in text]


def db_text(srv: Server) -> str:
    store = srv.gate.store
    assert isinstance(store, SQLiteStore)
    srv.run(store.flush_audit())
    with sqlite3.connect(store.path) as conn:
        rows = conn.execute("SELECT doc FROM requests").fetchall()
        rows += conn.execute("SELECT data FROM audit").fetchall()
    return "\n".join(str(r[0]) for r in rows)


def test_the_api_never_shows_a_secret_to_anyone(srv: Server) -> None:
    rid = ask(srv)
    for who in ("bob", "bot", "alice"):  # approver, the agent itself, an admin
        client = srv.client(who)
        for path in (f"/v1/requests/{rid}", f"/v1/requests/{rid}/wait?timeout=0", "/v1/requests"):
            r = client.get(path)
            assert r.status_code == 200 and not leaks(r.text), (who, path)
    doc = srv.client("bob").get(f"/v1/requests/{rid}").json()
    assert doc["action_requests"][0]["args"]["api_key"] == REDACTED
    assert doc["calls"][0]["action"]["args"]["cfg"] == {"password": REDACTED, "host": "db-1"}


def test_a_non_admin_approver_reads_the_audit_log_without_the_secret(srv: Server) -> None:
    rid = ask(srv)
    r = srv.client("bob").post(
        f"/v1/requests/{rid}/decisions", json=[{"type": "reject", "message": "no"}]
    )
    assert r.status_code == 200 and not leaks(r.text)
    for fmt in ("json", "jsonl"):
        audit = srv.client("bob").get(f"/v1/audit?request_id={rid}&format={fmt}")
        assert audit.status_code == 200 and rid in audit.text and not leaks(audit.text)
    records = srv.client("bob").get(f"/v1/audit?request_id={rid}").json()["records"]
    [created] = [r for r in records if r["event"] == "created"]
    call = created["data"]["calls"][0]
    assert call["args"]["service"] == "api" and call["args_digest"].startswith("hmac-sha256:")
    assert not leaks(db_text(srv))  # finished: the row holds digests only


def test_the_inbox_edit_form_masks_nested_secrets_and_an_edit_keeps_them(srv: Server) -> None:
    rid = ask(srv)
    bob = sign_in(srv, "bob")
    page = bob.get(f"/requests/{rid}").text
    assert not leaks(page) and not leaks(html.unescape(page))
    assert 'name="arg.api_key"' not in page  # a secret-named argument is never editable
    field = re.search(r'<textarea name="arg\.cfg"[^>]*>([^<]*)', page)
    assert field is not None
    shown = json.loads(html.unescape(field.group(1)))
    assert shown == {"password": REDACTED, "host": "db-1"}
    data = {
        "tool_call_id": "call_1",
        "type": "edit",
        "arg.service": "api",
        "arg.cfg": json.dumps({**shown, "host": "db-2"}),
        "csrf": csrf_of(bob),
    }
    assert form_post(bob, srv, f"/requests/{rid}/decide", data).status_code == 303
    stored = srv.run(srv.gate.get(rid))
    assert stored.calls[0].resolution == "edited"
    assert stored.calls[0].action.args == {**ARGS, "cfg": {"password": PASSWORD, "host": "db-2"}}
    assert not leaks(bob.get(f"/requests/{rid}").text)


def test_an_inbox_edit_that_changes_a_nested_secret_is_refused(srv: Server) -> None:
    rid = ask(srv)
    bob = sign_in(srv, "bob")
    data = {
        "tool_call_id": "call_1",
        "type": "edit",
        "arg.cfg": json.dumps({"password": "attacker", "host": "db-1"}),
        "csrf": csrf_of(bob),
    }
    r = form_post(bob, srv, f"/requests/{rid}/decide", data)
    assert "never editable" in r.text and not leaks(r.text)
    assert srv.run(srv.gate.get(rid)).pending


def test_an_api_edit_sent_back_masked_is_accepted_and_a_changed_secret_refused(
    srv: Server,
) -> None:
    rid = ask(srv)
    shown = srv.client("bob").get(f"/v1/requests/{rid}").json()["calls"][0]["action"]["args"]
    bad = {**shown, "api_key": "sk-ATTACKER"}
    r = srv.client("bob").post(
        f"/v1/requests/{rid}/decisions",
        json=[{"type": "edit", "edited_action": {"name": "configure", "args": bad}}],
    )
    assert r.status_code == 422 and r.json()["field"] == "decisions[0].edited_action.args.api_key"
    good = {**shown, "service": "web"}
    r = srv.client("bob").post(
        f"/v1/requests/{rid}/decisions",
        json=[{"type": "edit", "edited_action": {"name": "configure", "args": good}}],
    )
    assert r.status_code == 200 and not leaks(r.text)
    assert srv.run(srv.gate.get(rid)).calls[0].action.args == {**ARGS, "service": "web"}


def test_a_remote_agent_runs_an_edited_call_with_its_own_secrets(srv: Server) -> None:
    ran: list[dict[str, Any]] = []
    with RemoteGate(srv.url, srv.tokens["bot"], poll_timeout=5) as remote:

        @remote.guard
        def configure(service: str, api_key: str, cfg: dict[str, Any]) -> str:
            ran.append({"service": service, "api_key": api_key, "cfg": cfg})
            return "configured"

        def approver() -> None:
            for _ in range(2000):
                page = srv.client("bob").get("/v1/requests?status=pending").json()["requests"]
                if page:
                    break
                threading.Event().wait(0.01)
            req = page[0]
            args = {**req["calls"][0]["action"]["args"], "service": "web"}  # as shown: masked
            r = srv.client("bob").post(
                f"/v1/requests/{req['id']}/decisions",
                json=[{"type": "edit", "edited_action": {"name": "configure", "args": args}}],
            )
            assert r.status_code == 200, r.text

        t = threading.Thread(target=approver)
        t.start()
        with remote.context(principal="frank", thread="t-remote"):
            assert configure("api", LIVE, {"password": PASSWORD, "host": "db-1"}) == "configured"
        t.join()
    assert ran == [
        {"service": "web", "api_key": LIVE, "cfg": {"password": PASSWORD, "host": "db-1"}}
    ]
    assert not leaks(db_text(srv))  # executed: sealed
