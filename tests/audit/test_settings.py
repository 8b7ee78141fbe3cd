"""The ``audit:`` section: defaults, the key by reference only, and where checkpoints go."""

from __future__ import annotations

from pathlib import Path

import pytest

from signoff import Policy
from signoff.assemble import check_sections
from signoff.audit import AnchorTarget, AuditSettings, parse_anchor
from signoff.audit.settings import from_sections
from signoff.model import PolicyError

KEY = "0123456789abcdef0123456789abcdef"


@pytest.fixture(autouse=True)
def audit_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_AUDIT_KEY", KEY)


def settings(**audit: object) -> AuditSettings:
    return from_sections({"audit": audit})


def test_defaults_write_no_checkpoints() -> None:
    s = settings()
    assert (s.key, s.anchor, s.anchor_every, s.anchor_interval) == (None, None, 100, 10.0)
    assert s.target() is None and s.key_bytes is None


def test_a_full_section() -> None:
    s = settings(
        key="${SIGNOFF_AUDIT_KEY}",
        anchor="file:///var/lib/anchors/a.jsonl",
        anchor_every=10,
        anchor_interval="2s",
        signer="replica-a",
    )
    assert s.key_bytes == KEY.encode()
    assert s.target() == AnchorTarget("file", "/var/lib/anchors/a.jsonl")
    assert (s.anchor_every, s.anchor_interval, s.signer_name()) == (10, 2.0, "replica-a")


def test_the_signer_defaults_to_host_and_pid() -> None:
    import os
    import socket

    assert settings().signer_name() == f"{socket.gethostname()}:{os.getpid()}"


def test_an_inline_key_is_refused() -> None:
    with pytest.raises(PolicyError, match=r"never inline") as err:
        settings(key=KEY)
    assert err.value.path == "signoff.yaml.audit.key"


def test_a_short_key_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHORT", "abc")
    with pytest.raises(PolicyError, match="at least 16 characters"):
        settings(key="${SHORT}")


def test_an_anchor_needs_a_key() -> None:
    with pytest.raises(PolicyError, match=r"audit\.anchor needs audit\.key"):
        settings(anchor="file:///tmp/a.jsonl")


@pytest.mark.parametrize(
    "url",
    ["ftp://x/a", "http://anchors.example.com/", "file://host/a.jsonl", "file:///dir/", "x"],
)
def test_bad_anchor_urls_are_refused(url: str) -> None:
    with pytest.raises(PolicyError, match=r"audit\.anchor"):
        settings(key="${SIGNOFF_AUDIT_KEY}", anchor=url)


@pytest.mark.parametrize(
    ("url", "target"),
    [
        (
            "https://anchors.example.com/signoff",
            AnchorTarget("http", "https://anchors.example.com/signoff"),
        ),
        ("http://127.0.0.1:9000/a", AnchorTarget("http", "http://127.0.0.1:9000/a")),
        ("http://localhost/a", AnchorTarget("http", "http://localhost/a")),
        ("http://[::1]:8/a", AnchorTarget("http", "http://[::1]:8/a")),
        ("file:anchors.jsonl", AnchorTarget("file", "anchors.jsonl")),
    ],
)
def test_anchor_urls(url: str, target: AnchorTarget) -> None:
    assert parse_anchor(url) == target


def test_a_relative_file_is_next_to_the_config(tmp_path: Path) -> None:
    s = settings(key="${SIGNOFF_AUDIT_KEY}", anchor="file:anchors/a.jsonl")
    assert s.target(tmp_path) == AnchorTarget("file", str(tmp_path / "anchors" / "a.jsonl"))


def test_policy_check_runs_the_audit_checker(tmp_path: Path) -> None:
    bad = Policy.from_yaml("version: 1\naudit: {anchor_every: 0}\n")
    errors, _ = check_sections(bad)
    assert errors and "audit.anchor_every" in errors[0]
    unset = Policy.from_yaml("version: 1\naudit: {key: '${NOT_SET_ANYWHERE}'}\n")
    errors, warnings = check_sections(unset)
    assert not errors and "NOT_SET_ANYWHERE" in warnings[0]  # the key may live elsewhere
    assert check_sections(Policy.from_yaml("version: 1\naudit: {}\n")) == ([], [])
