"""The audit hash chain and its export formats (signoff/store/audit.py)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

from signoff.model import AuditEvent, AuditRecord
from signoff.store.audit import (
    FIELDS,
    GENESIS_HASH,
    iso_utc,
    seal_all,
    to_csv,
    to_jsonl,
    verify_chain,
)

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def chain(n: int = 4) -> list[AuditRecord]:
    events = [
        AuditEvent(event="allowed", at=T0 + timedelta(seconds=i), tool="t", data={"i": i})
        for i in range(n)
    ]
    return seal_all(events, 0, GENESIS_HASH)


def test_a_fresh_chain_starts_at_genesis_and_verifies() -> None:
    records = chain()
    assert records[0].seq == 1 and records[0].prev_hash == "0" * 64
    assert verify_chain(records).ok
    assert verify_chain(records).checked == 4


def test_an_empty_log_verifies() -> None:
    assert verify_chain([]).ok


def test_changed_content_is_a_hash_mismatch_at_that_row() -> None:
    records = chain()
    records[2] = replace(records[2], data={"i": 99})
    result = verify_chain(records)
    assert (result.ok, result.broken_seq, result.checked) == (False, 3, 2)
    assert result.problem is not None and "hash mismatch" in result.problem


def test_rewritten_hash_is_a_broken_link_at_the_next_row() -> None:
    records = chain()
    forged = seal_all(
        [AuditEvent(event="allowed", at=T0, tool="t", data={"i": 99})], 1, records[0].hash
    )[0]
    records[1] = forged
    result = verify_chain(records)
    assert result.broken_seq == 3
    assert result.problem is not None and "broken link" in result.problem


def test_missing_row_is_a_gap_in_seq() -> None:
    records = chain()
    del records[1]
    result = verify_chain(records)
    assert result.broken_seq == 3
    assert result.problem is not None and "gap in seq" in result.problem


def test_log_not_starting_at_one_is_reported() -> None:
    result = verify_chain(chain()[1:])
    assert result.broken_seq == 2
    assert result.problem is not None and "instead of 1" in result.problem


def test_timestamps_are_canonical_utc_with_microseconds() -> None:
    plus_two = timezone(timedelta(hours=2))
    assert iso_utc(datetime(2026, 1, 2, 5, 4, 5, tzinfo=plus_two)) == "2026-01-02T03:04:05.000000Z"
    assert iso_utc(datetime(2026, 1, 2, 3, 4, 5, 7)) == "2026-01-02T03:04:05.000007Z"


def test_same_event_in_another_timezone_hashes_the_same() -> None:
    local = T0.astimezone(timezone(timedelta(hours=-5)))
    a = seal_all([AuditEvent(event="allowed", at=T0)], 0, GENESIS_HASH)[0]
    b = seal_all([AuditEvent(event="allowed", at=local)], 0, GENESIS_HASH)[0]
    assert a.hash == b.hash


def test_jsonl_export_can_be_verified_without_signoff() -> None:
    lines = to_jsonl(chain()).splitlines()
    prev = "0" * 64
    for line in lines:
        row = json.loads(line)
        digest = row.pop("hash")
        body = json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        assert hashlib.sha256(body.encode()).hexdigest() == digest
        assert row["prev_hash"] == prev
        prev = digest
    assert len(lines) == 4


def test_csv_export_has_a_header_and_one_row_per_record() -> None:
    text = to_csv(chain(2))
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == list(FIELDS)
    assert len(rows) == 3
    first = dict(zip(FIELDS, rows[1], strict=True))
    assert first["seq"] == "1" and first["data"] == '{"i":0}' and first["actor"] == ""
    assert first["at"] == "2026-11-21T12:00:00.000000Z"


def test_csv_pages_can_be_appended_without_repeating_the_header() -> None:
    assert to_csv(chain(1), header=False).count("\n") == 1
