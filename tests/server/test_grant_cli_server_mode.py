"""``signoff grant …`` through a server (``--server`` and an approver token): the creator and
revoker are the token's person, ``--as`` is refused, refusals come back as one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from signoff.cli import app
from signoff.cli.deciding import APPROVER_TOKEN_ENV
from signoff.store import MemoryStore
from tests.server.conftest import Server, start_server

runner = CliRunner()
AGENT_GRANT = ["grant", "add", "--tool", "deploy", "--effect", "allow", "--agent", "bot"]


@pytest.fixture
def srv() -> Iterator[Server]:
    server = start_server(MemoryStore())
    yield server
    server.close()


@pytest.fixture(autouse=True)
def no_local_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SIGNOFF_CONFIG", raising=False)
    monkeypatch.delenv(APPROVER_TOKEN_ENV, raising=False)


def cli(srv: Server, who: str | None, *args: str) -> tuple[int, str]:
    env = {"COLUMNS": "250", **({APPROVER_TOKEN_ENV: srv.tokens[who]} if who else {})}
    result = runner.invoke(app, [*args, "--server", srv.url], env=env)
    return result.exit_code, result.output


def test_add_through_the_server_is_made_by_the_tokens_person(srv: Server) -> None:
    code, out = cli(srv, "dave", *AGENT_GRANT, "--for", "1h", "-m", "release")
    assert code == 0, out
    assert "rule deploy.default: the rule the policy sends such a call to" in out
    assert "grant: also approve `deploy` calls under rule deploy.default from bot until" in out
    [grant] = srv.run(srv.gate.alist_grants())
    assert grant.created_by == "dave" and grant.reason == "release"
    assert f"created {grant.id}" in out


def test_as_is_refused_through_a_server(srv: Server) -> None:
    code, out = cli(srv, "dave", *AGENT_GRANT, "--as", "alice")
    assert code == 2 and "--as is not accepted" in out
    assert srv.run(srv.gate.alist_grants()) == []


def test_a_refusal_through_the_server_is_one_line(srv: Server) -> None:
    code, out = cli(srv, "bob", *AGENT_GRANT, "--json")  # finance may not approve deploy
    assert code == 1
    assert json.loads(out.splitlines()[-1])["error"] == "not_authorized"
    code, out = cli(srv, "dave", *AGENT_GRANT, "--when", '{"args.v": {"nope": 1}}')
    assert code == 2 and "--when" in out


def test_list_and_revoke_through_the_server(srv: Server) -> None:
    made = json.loads(cli(srv, "dave", *AGENT_GRANT, "--json")[1])
    code, out = cli(srv, "bob", "grant", "list", "--active", "--json")
    assert code == 0 and [g["id"] for g in json.loads(out)] == [made["id"]]
    code, out = cli(srv, "bob", "grant", "revoke", made["id"])
    assert code == 1 and "may not revoke" in out
    code, out = cli(srv, "dave", "grant", "revoke", made["id"], "-m", "done", "--json")
    assert code == 0, out
    revoked = json.loads(out)
    assert revoked["revoked_by"] == "dave" and revoked["revoke_reason"] == "done"
    assert json.loads(cli(srv, "bob", "grant", "list", "--active", "--json")[1]) == []
    code, out = cli(srv, "bob", "grant", "list")
    assert code == 0 and "revoked by dave" in out
