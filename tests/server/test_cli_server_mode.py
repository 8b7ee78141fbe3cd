"""The decision commands against a real ``signoff serve``: ``--server`` plus an approver token
(``--token`` or ``$SIGNOFF_APPROVER_TOKEN``); the identity is the token's, ``--as`` is refused,
and the output has the same shapes as local mode."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from signoff.cli import app
from signoff.cli.deciding import APPROVER_TOKEN_ENV
from signoff.store import SQLiteStore
from tests.server.conftest import Server, start_server

runner = CliRunner()


@pytest.fixture
def srv(tmp_path: Path) -> Iterator[Server]:
    server = start_server(SQLiteStore(tmp_path / "server.db"))
    yield server
    server.close()


@pytest.fixture(autouse=True)
def no_local_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands run where there is no signoff.yaml: --server needs none."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SIGNOFF_CONFIG", raising=False)
    monkeypatch.delenv(APPROVER_TOKEN_ENV, raising=False)


def cli(srv: Server, who: str | None, *args: str) -> tuple[int, str]:
    env = {"COLUMNS": "200", **({APPROVER_TOKEN_ENV: srv.tokens[who]} if who else {})}
    result = runner.invoke(app, [*args, "--server", srv.url], env=env)
    return result.exit_code, result.output


def wire(srv: Server, rid: str) -> dict[str, Any]:
    """The request as local mode's --json prints it (``ApprovalRequest.to_wire``)."""
    req = srv.run(srv.gate.get(rid))
    return json.loads(json.dumps(req.to_wire()))


def test_approve_through_the_server_records_the_tokens_person(srv: Server) -> None:
    rid = srv.pending()
    code, out = cli(srv, "bob", "approve", rid, "-m", "ok", "--json")
    assert code == 0, out
    printed = json.loads(out)
    assert printed == wire(srv, rid)  # the local --json shape, and what is stored
    assert printed["status"] == "resolved"
    (decision,) = printed["decisions"]
    assert decision["approver"] == "bob" and decision["channel"] == "api"
    assert decision["os_user"] is None  # only local decisions record an OS user


def test_approve_prints_the_same_summary_as_local_mode(srv: Server) -> None:
    rid = srv.pending()
    code, out = cli(srv, "bob", "approve", rid)
    assert code == 0, out
    assert "transfer_funds call_1: approved by bob" in out
    assert f"request {rid} is resolved" in out


def test_as_is_refused_with_server(srv: Server) -> None:
    rid = srv.pending()
    code, out = cli(srv, "bob", "approve", rid, "--as", "alice")
    assert code == 2
    assert "--as is not accepted" in out and "approver token" in out
    assert srv.run(srv.gate.get(rid)).pending


def test_as_is_refused_with_server_under_json(srv: Server) -> None:
    code, out = cli(srv, "bob", "reject", "req_x", "-m", "no", "--as", "bob", "--json")
    assert code == 2
    assert json.loads(out.splitlines()[-1])["error"] == "invalid_input"


def test_a_token_is_required(srv: Server) -> None:
    code, out = cli(srv, None, "approve", srv.pending())
    assert code == 2
    assert APPROVER_TOKEN_ENV in out and "--token" in out


def test_token_option_instead_of_the_environment(srv: Server) -> None:
    rid = srv.pending()
    code, out = cli(srv, None, "approve", rid, "--token", srv.tokens["carol"], "--json")
    assert code == 0, out
    assert json.loads(out)["decisions"][0]["approver"] == "carol"


def test_an_unknown_token_is_refused(srv: Server) -> None:
    result = runner.invoke(
        app, ["approve", srv.pending(), "--server", srv.url, "--token", "so_approver_nope"]
    )
    assert result.exit_code == 1
    assert "unknown or was revoked" in result.output


def test_an_agent_token_cannot_decide(srv: Server) -> None:
    code, out = cli(srv, "bot", "approve", srv.pending())
    assert code == 1 and "agent tokens may not" in out


def test_self_approval_is_refused_through_the_server(srv: Server) -> None:
    """The attack from issue 12 over the wire: a request for "Erin", erin's token."""
    rid = srv.pending(principal="Erin")
    code, out = cli(srv, "erin", "approve", rid)
    assert code == 1
    assert "forbid_self_approval" in out
    assert srv.run(srv.gate.get(rid)).pending


def test_reject_through_the_server(srv: Server) -> None:
    rid = srv.pending()
    code, out = cli(srv, "carol", "reject", rid, "-m", "not today", "--json")
    assert code == 0, out
    call = json.loads(out)["calls"][0]
    assert call["resolution"] == "rejected" and call["message"] == "not today"


def test_edit_through_the_server(srv: Server) -> None:
    rid = srv.pending(amount=50_000)
    code, out = cli(srv, "bob", "edit", rid, "--call", "call_1", "--args", '{"amount": 20000}')
    assert code == 0, out
    call = srv.run(srv.gate.get(rid)).calls[0]
    assert call.resolution == "edited" and call.action.args["amount"] == 20_000


def test_respond_through_the_server(srv: Server) -> None:
    r = srv.submit([{"id": "d1", "name": "deploy", "args": {"version": "1.2"}}])
    rid = r.json()["id"]
    code, out = cli(srv, "dave", "respond", rid, "-m", "deploy tomorrow", "--json")
    assert code == 0, out
    assert json.loads(out)["calls"][0]["resolution"] == "responded"


def test_a_second_decision_is_already_decided(srv: Server) -> None:
    rid = srv.pending()
    assert cli(srv, "bob", "approve", rid)[0] == 0
    code, out = cli(srv, "carol", "reject", rid, "-m", "too late", "--json")
    assert code == 1
    assert "already" in out and "bob" in out


def test_pending_lists_what_the_token_may_see(srv: Server) -> None:
    finance = srv.pending()
    srv.submit([{"id": "d1", "name": "deploy", "args": {"version": "1.2"}}], thread="t-2")
    code, out = cli(srv, "bob", "pending", "--json")
    assert code == 0, out
    listed = json.loads(out)
    assert [r["id"] for r in listed] == [finance]  # bob (finance) does not see the deploy
    assert listed[0] == wire(srv, finance)
    code, out = cli(srv, "bob", "pending")
    assert code == 0 and finance in out and "transfer_funds" in out


def test_pending_filters_by_thread(srv: Server) -> None:
    srv.pending(thread="a")
    other = srv.pending(call_id="call_2", thread="b")
    code, out = cli(srv, "alice", "pending", "--thread", "b", "--json")
    assert code == 0, out
    assert [r["id"] for r in json.loads(out)] == [other]


def test_show_through_the_server(srv: Server) -> None:
    rid = srv.pending()
    code, out = cli(srv, "bob", "show", rid, "--json")
    assert code == 0, out
    assert json.loads(out) == wire(srv, rid)
    code, out = cli(srv, "bob", "show", rid)
    assert code == 0 and rid in out and "large-transfer" in out


def test_show_of_a_request_the_token_may_not_see(srv: Server) -> None:
    code, out = cli(srv, "dave", "show", srv.pending())
    assert code == 1 and "may not see" in out


def test_cancel_through_the_server_needs_an_admin(srv: Server) -> None:
    rid = srv.pending()
    code, out = cli(srv, "bob", "cancel", rid)
    assert code == 1 and "admin" in out
    code, out = cli(srv, "alice", "cancel", rid, "-m", "duplicate", "--json")
    assert code == 0, out
    assert json.loads(out)["status"] == "cancelled"
    cancelled = srv.run(srv.gate.get(rid))
    assert cancelled.calls[0].resolved_by == "alice" and cancelled.calls[0].message == "duplicate"


def test_cancel_refuses_as_with_server(srv: Server) -> None:
    code, out = cli(srv, "alice", "cancel", srv.pending(), "--as", "alice")
    assert code == 2 and "--as is not accepted" in out


def test_the_configs_remote_url_is_used_without_server(srv: Server, tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(
        textwrap.dedent(
            f"""
            version: 1
            remote: {{url: "{srv.url}", token: "${{SIGNOFF_TOKEN}}"}}
            """
        )
    )
    rid = srv.pending()
    env = {APPROVER_TOKEN_ENV: srv.tokens["bob"]}
    result = runner.invoke(app, ["approve", rid, "--config", str(config), "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["decisions"][0]["approver"] == "bob"
    result = runner.invoke(app, ["approve", rid, "--config", str(config), "--as", "bob"], env=env)
    assert result.exit_code == 2 and "--as is not accepted" in result.output


def test_server_overrides_the_configs_remote_url(srv: Server, tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text('version: 1\nremote: {url: "http://127.0.0.1:9", token: x}\n')
    rid = srv.pending()
    code, out = cli(srv, "bob", "show", rid, "--config", str(config), "--json")
    assert code == 0, out
    assert json.loads(out)["id"] == rid


def test_a_bad_server_url_is_an_input_error(srv: Server) -> None:
    result = runner.invoke(app, ["pending", "--server", "ftp://x", "--token", "t"])
    assert result.exit_code == 2 and "http" in result.output


def test_an_unreachable_server_is_one_line(srv: Server) -> None:
    from tests.server.test_cli_commands import free_port

    url = f"http://127.0.0.1:{free_port()}"
    result = runner.invoke(app, ["show", "req_x", "--server", url, "--token", "t"])
    assert result.exit_code == 1
    assert "unreachable" in result.output and "Traceback" not in result.output
