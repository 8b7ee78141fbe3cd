"""``people:``, principals, ``store:`` URLs, reserved sections, hash and summary."""

from __future__ import annotations

from pathlib import Path

from signoff.model import Principal
from signoff.policy import Person, Policy
from signoff.policy.sections import RUNTIME_SECTIONS
from tests.policy.helpers import EXAMPLES, call, ctx, load

PEOPLE = """
people:
  alice: {roles: [dba, admin], slack: U123, discord: 1234, email: a@b.c, line: Uabc, name: Alice A.}
  erin:
"""


def test_people_become_persons() -> None:
    alice = load(PEOPLE).people["alice"]
    assert alice == Person(
        "alice", frozenset({"dba", "admin"}), "Alice A.", "U123", "1234", "a@b.c", "Uabc"
    )


def test_person_without_fields_has_no_roles() -> None:
    assert load(PEOPLE).people["erin"] == Person("erin")


def test_roles_of_listed_and_unlisted_people() -> None:
    policy = load(PEOPLE)
    assert policy.roles_of("alice") == frozenset({"dba", "admin"})
    assert policy.roles_of("zed") == frozenset()


def test_principal_roles_come_from_the_directory_when_listed() -> None:
    policy = load(PEOPLE)
    assert policy.principal("alice", ["intern"]) == Principal("alice", frozenset({"dba", "admin"}))
    assert policy.principal("zed", ["intern"]) == Principal("zed", frozenset({"intern"}))


def test_directory_roles_win_in_conditions() -> None:
    policy = load(
        PEOPLE
        + """
tools:
  t:
    default: allow
    rules:
      - {id: dba-only, when: {not: {principal.roles: {contains: dba}}}, decision: deny, reason: x}
"""
    )
    # erin claims dba, but the directory lists erin without roles.
    assert policy.evaluate(call("t"), ctx("erin", ("dba",))).kind == "deny"
    assert policy.evaluate(call("t"), ctx("alice")).kind == "allow"


def test_default_store_is_sqlite_next_to_the_file(tmp_path: Path) -> None:
    path = tmp_path / "signoff.yaml"
    path.write_text("version: 1\n", encoding="utf-8")
    assert Policy.load(path).store_url == f"sqlite:///{tmp_path / 'signoff.db'}"


def test_relative_sqlite_store_resolves_against_the_file(tmp_path: Path) -> None:
    path = tmp_path / "signoff.yaml"
    path.write_text("version: 1\nstore: sqlite:///data/approvals.db\n", encoding="utf-8")
    assert Policy.load(path).store_url == f"sqlite:///{tmp_path / 'data' / 'approvals.db'}"


def test_absolute_sqlite_store_is_kept() -> None:
    assert load("store: sqlite:////var/lib/signoff.db").store_url == "sqlite:////var/lib/signoff.db"


def test_yaml_text_store_resolves_against_base_dir(tmp_path: Path) -> None:
    policy = Policy.from_yaml("version: 1\nstore: sqlite:///s.db\n", base_dir=tmp_path)
    assert policy.store_url == f"sqlite:///{tmp_path / 's.db'}"


def test_mapping_default_store_is_relative_to_cwd() -> None:
    policy = Policy.from_mapping({"version": 1})
    assert policy.store_url == f"sqlite:///{Path.cwd() / 'signoff.db'}"


def test_memory_and_postgres_stores_are_kept() -> None:
    assert load("store: memory://").store_url == "memory://"
    url = "postgresql://signoff:${PGPASSWORD}@db/signoff"
    policy = load(f"store: '{url}'")
    assert policy.store_url == url
    assert policy.warnings == []


def test_inline_postgres_password_warns() -> None:
    policy = load("store: postgresql://u:hunter2@db/signoff")
    assert any("inline password" in w for w in policy.warnings)


def test_reserved_sections_are_exposed_raw() -> None:
    policy = load("serve: {port: 8080}\nchannels: {slack: {token: '${SLACK_TOKEN}'}}")
    assert policy.sections["serve"] == {"port": 8080}
    assert policy.sections["channels"] == {"slack": {"token": "${SLACK_TOKEN}"}}
    # every runtime section of the registry is there, empty when the file has none
    assert policy.sections["auth"] == {} and set(policy.sections) == set(RUNTIME_SECTIONS)
    assert {"serve", "remote", "channels", "auth", "ui", "gate"} <= set(RUNTIME_SECTIONS)


def test_file_hash_is_sha256_of_the_bytes(tmp_path: Path) -> None:
    import hashlib

    raw = b"version: 1\n# comment\n"
    path = tmp_path / "signoff.yaml"
    path.write_bytes(raw)
    policy = Policy.load(path)
    assert policy.hash == hashlib.sha256(raw).hexdigest()
    assert policy.path == path


def test_mapping_hash_ignores_key_order() -> None:
    one = Policy.from_mapping({"version": 1, "tools": {"a": {"default": "allow"}}, "people": {}})
    two = Policy.from_mapping({"people": {}, "tools": {"a": {"default": "allow"}}, "version": 1})
    assert one.hash == two.hash


def test_summary_counts() -> None:
    summary = Policy.load(EXAMPLES / "signoff.yaml").summary()
    assert (summary["tools"], summary["glob_tools"], summary["rules"], summary["people"]) == (
        7, 1, 4, 5
    )  # fmt: skip
    assert summary["roles"] == ["admin", "dba", "finance", "ops", "trader"]
