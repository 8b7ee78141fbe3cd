"""``signoff grant add | list | revoke`` on the local store, and ``policy explain --grants``."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from signoff import CallContext, Gate, Principal, ToolCall
from signoff.cli import app

POLICY = """
version: 1
store: sqlite:///signoff.db
people:
  admin: {roles: [admin]}
  bob:   {roles: [ops]}
  carol: {roles: [ops]}
  erin:  {roles: []}
grants: {default_ttl: 1h, max_ttl: 1d}
tools:
  deploy:
    default: require_approval
    approvers: {roles: [ops]}
    rules:
      - id: prod-deploy
        when: {args.env: prod}
        decision: require_approval
        approvers: {roles: [ops]}
      - id: prod-db
        when: {args.env: db}
        decision: require_approval
        approvers: {roles: [ops], quorum: 2}
  read_file:
    default: allow
"""

THREAD = ["--thread", "t-1", "--agent", "billing-bot", "--principal", "erin"]

runner = CliRunner()


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "signoff.yaml"
    path.write_text(textwrap.dedent(POLICY))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SIGNOFF_APPROVER_TOKEN", raising=False)
    yield path


def cli(config: Path, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, [*args, "--config", str(config)], env={"COLUMNS": "250"})
    return result.exit_code, result.output


def add(config: Path, *args: str) -> dict[str, Any]:
    code, out = cli(
        config, "grant", "add", "--tool", "deploy", "--effect", "allow", *args, "--json"
    )
    assert code == 0, out
    return dict(json.loads(out))


def check(config: Path, env: str = "prod", **ctx: Any) -> Any:
    context = {"agent": "billing-bot", "thread": "t-1", "principal": Principal("erin"), **ctx}
    with Gate.from_config(config) as gate:
        return gate.check(ToolCall("deploy", {"env": env}), CallContext(**context))


def test_add_prints_the_resolved_rule_and_the_exact_sentence(config: Path) -> None:
    code, out = cli(
        config, "grant", "add", "--tool", "deploy", "--effect", "allow", *THREAD,
        "--when", '{"args.env": "prod"}', "--for", "2h", "--as", "bob", "-m", "release day",
    )  # fmt: skip
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == "rule prod-deploy: the rule the policy sends such a call to"
    assert lines[1].startswith(
        "grant: also approve `deploy` calls under rule prod-deploy from billing-bot for erin "
        'on thread t-1 when {"args.env": "prod"} until '
    )
    assert lines[-1].startswith("created grant_")
    assert check(config).allowed
    assert check(config, agent="evil-bot").needs_approval
    assert check(config, env="staging").needs_approval  # deploy.default: another rule


def test_add_json_and_list(config: Path) -> None:
    made = add(config, "--agent", "billing-bot", "--rule", "deploy.default", "--as", "bob")
    assert made["scope"] == "agent" and made["created_by"] == "bob" and made["active"]
    assert made["description"].startswith("also approve `deploy` calls under rule deploy.default")
    code, out = cli(config, "grant", "list", "--json")
    assert code == 0 and [g["id"] for g in json.loads(out)] == [made["id"]]
    code, out = cli(config, "grant", "list")
    assert code == 0 and made["id"] in out and "active" in out and "bob" in out


def test_revoke_by_its_creator_and_list_active(config: Path) -> None:
    made = add(config, *THREAD, "--rule", "prod-deploy", "--as", "bob")
    code, out = cli(config, "grant", "revoke", made["id"], "--as", "carol")
    assert code == 1 and "may not revoke" in out
    code, out = cli(config, "grant", "revoke", made["id"], "--as", "bob", "-m", "done")
    assert code == 0 and f"revoked {made['id']}" in out
    assert check(config).needs_approval
    code, out = cli(config, "grant", "list", "--active", "--json")
    assert code == 0 and json.loads(out) == []
    [listed] = json.loads(cli(config, "grant", "list", "--json")[1])
    assert listed["revoked_by"] == "bob" and listed["revoke_reason"] == "done"


def test_an_admin_revokes_anyones_grant(config: Path) -> None:
    made = add(config, "--agent", "billing-bot", "--rule", "prod-deploy", "--as", "bob")
    code, out = cli(config, "grant", "revoke", made["id"], "--as", "admin", "--json")
    assert code == 0 and json.loads(out)["revoked_by"] == "admin"


def test_revoking_an_unknown_grant_fails(config: Path) -> None:
    code, out = cli(config, "grant", "revoke", "grant_nope", "--as", "admin", "--json")
    assert code == 1 and json.loads(out.splitlines()[-1])["error"] == "not_found"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--as", "bob"], "say what the grant covers"),
        (["--global", "--agent", "a", "--as", "admin"], "--global"),
        (["--thread", "t-1", "--agent", "a", "--as", "bob"], "--principal"),
        (["--agent", "a", "--principal", "erin", "--as", "bob"], "say which"),
        (["--agent", "a", "--for", "forever", "--rule", "prod-deploy", "--as", "bob"], "--for"),
        (["--agent", "a", "--for", "3d", "--rule", "prod-deploy", "--as", "bob"], "--for"),
        (["--agent", "a", "--when", "[1]", "--as", "bob"], "--when"),
        (["--agent", "a", "--when", '{"args.env": {"nope": 1}}', "--as", "bob"], "--when"),
        (["--agent", "a", "--as", "bob"], "--rule"),  # deploy's rules read args.env
        (["--agent", "a", "--when", '{"args.env": "db"}', "--as", "bob"], "quorum"),
        (["--agent", "a", "--rule", "prod-deploy"], "--as"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(config: Path, args: list[str], says: str) -> None:
    code, out = cli(config, "grant", "add", "--tool", "deploy", "--effect", "allow", *args)
    assert code == 2, out
    assert says in out and "Traceback" not in out
    assert json.loads(cli(config, "grant", "list", "--json")[1]) == []


def test_a_bad_effect_is_exit_2(config: Path) -> None:
    code, out = cli(config, "grant", "add", "--tool", "deploy", "--effect", "maybe", "--agent", "a")
    assert code == 2 and "--effect" in out


def test_a_call_the_policy_allows_cannot_be_granted(config: Path) -> None:
    code, out = cli(
        config, "grant", "add", "--tool", "read_file", "--effect", "allow", "--agent", "a",
        "--as", "bob", "--json",
    )  # fmt: skip
    assert code == 2
    error = json.loads(out.splitlines()[-1])
    assert error["error"] == "invalid_input" and "never apply" in error["message"]


def test_who_may_not_grant_gets_exit_1(config: Path) -> None:
    code, out = cli(
        config, "grant", "add", "--tool", "deploy", "--effect", "allow", *THREAD,
        "--rule", "prod-deploy", "--as", "erin", "--json",
    )  # fmt: skip
    assert code == 1
    assert json.loads(out.splitlines()[-1])["error"] == "not_authorized"
    code, out = cli(
        config, "grant", "add", "--tool", "deploy", "--effect", "deny", "--agent", "a",
        "--rule", "prod-deploy", "--as", "bob",
    )  # fmt: skip
    assert code == 1 and "admin" in out


def test_an_admin_deny_grant_rejects_at_once(config: Path) -> None:
    code, out = cli(
        config, "grant", "add", "--tool", "deploy", "--effect", "deny", "--global",
        "--rule", "prod-deploy", "--as", "admin", "-m", "change freeze",
    )  # fmt: skip
    assert code == 0, out
    assert "also reject `deploy` calls under rule prod-deploy from every agent" in out
    verdict = check(config)
    assert verdict.kind == "deny" and "change freeze" in (verdict.reason or "")


def test_policy_explain_grants_shows_what_would_apply(config: Path) -> None:
    made = add(config, *THREAD, "--rule", "prod-deploy", "--as", "bob")
    explain = [
        "policy", "explain", "--tool", "deploy", "--args", '{"env": "prod"}',
        "--principal", "erin", "--context", '{"agent": "billing-bot", "thread": "t-1"}',
        "--grants",
    ]  # fmt: skip
    code, out = cli(config, *explain)
    assert code == 0, out
    assert f"grants: {made['id']} applies: the call would be approved at once" in out
    assert made["description"] in out
    code, out = cli(config, *explain, "--json")
    assert [g["id"] for g in json.loads(out)["grants"]] == [made["id"]]
    other = [a.replace("t-1", "t-2") for a in explain]
    code, out = cli(config, *other)
    assert "grants: no active grant applies (1 active)" in out


def test_policy_explain_grants_says_when_grants_cannot_apply(config: Path) -> None:
    code, out = cli(config, "policy", "explain", "--tool", "read_file", "--grants")
    assert code == 0 and "grants apply only to calls that need approval" in out


def test_approve_for_thread_says_which_grant_it_created(config: Path) -> None:
    ctx = CallContext(principal=Principal("erin"), agent="billing-bot", thread="t-1")
    with Gate.from_config(config) as gate:
        sub = gate.submit([ToolCall("deploy", {"env": "prod"})], ctx)
        assert sub.request is not None
        rid = sub.request.id
    code, out = cli(config, "approve", rid, "--for-thread", "--as", "bob")
    assert code == 0, out
    [grant] = json.loads(cli(config, "grant", "list", "--json")[1])
    assert f"also granted {grant['id']}" in out
    assert grant["scope"] == "thread" and grant["rule"] == "prod-deploy"
    assert check(config).allowed
