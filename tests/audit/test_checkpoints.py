"""Signed checkpoints: the signature covers every field, and the file format is forgiving
only of a torn last line."""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from signoff.audit import Checkpoint, read_checkpoints, sign, signature_ok
from signoff.audit.checkpoints import parse

KEY = b"0123456789abcdef0123456789abcdef"
HASH = "ab" * 32


def test_a_checkpoint_verifies_with_its_key_only() -> None:
    cp = sign(KEY, 42, HASH, "web-1:7", at=datetime(2026, 11, 23, 10, 0, tzinfo=UTC))
    assert cp.at == "2026-11-23T10:00:00.000000Z"
    assert signature_ok(KEY, cp)
    assert not signature_ok(b"another key of sufficient length", cp)


@pytest.mark.parametrize(
    "change",
    [{"seq": 43}, {"hash": "cd" * 32}, {"at": "2026-11-23T10:00:01.000000Z"}, {"signer": "x"}],
)
def test_changing_any_field_breaks_the_signature(change: dict[str, object]) -> None:
    cp = sign(KEY, 42, HASH, "web-1:7")
    assert not signature_ok(KEY, replace(cp, **change))  # type: ignore[arg-type]


def test_the_signature_can_be_checked_without_signoff() -> None:
    line = sign(KEY, 7, HASH, "sidecar").line()
    data = json.loads(line)
    sig = data.pop("sig")
    body = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    expected = hmac.new(KEY, b"signoff-audit-checkpoint\n" + body, hashlib.sha256).hexdigest()
    assert sig == f"hmac-sha256:{expected}"


def test_a_line_round_trips() -> None:
    cp = sign(KEY, 1, HASH, "a")
    assert parse(json.loads(cp.line())) == cp


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ([], "not a JSON object"),
        ({"v": 2}, "version"),
        ({"v": 1, "seq": 0, "hash": HASH, "at": "", "signer": "", "sig": ""}, "seq"),
        ({"v": 1, "seq": True, "hash": HASH, "at": "", "signer": "", "sig": ""}, "seq"),
        ({"v": 1, "seq": 1, "hash": "zz", "at": "", "signer": "", "sig": ""}, "hash"),
        ({"v": 1, "seq": 1, "hash": HASH, "at": 5, "signer": "", "sig": ""}, "at must be"),
        ({"v": 1, "seq": 1, "hash": HASH, "at": "", "signer": "", "sig": "", "x": 1}, "unknown"),
    ],
)
def test_malformed_checkpoints_are_refused_with_the_reason(value: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse(value)


def test_reading_a_file_numbers_lines_and_tells_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "anchors.jsonl"
    good = [sign(KEY, n, HASH, "a") for n in (1, 2)]
    path.write_text(good[0].line() + "garbage\n\n" + good[1].line() + '{"v": 1, "se')
    found, bad = read_checkpoints(path)
    assert found == [(1, good[0]), (4, good[1])]
    assert [(b.line, b.torn) for b in bad] == [(2, False), (5, True)]


def test_checkpoint_fields_are_exactly_the_documented_ones() -> None:
    assert set(sign(KEY, 1, HASH, "a").to_json()) == {"v", "seq", "hash", "at", "signer", "sig"}
    assert isinstance(Checkpoint(1, HASH, "t", "s").body()["seq"], int)
