"""``seal_row`` writes the hashed object's canonical text field by field (signoff/store/audit.py
``unsealed``); it must be byte for byte what the canonical encoder gives for the row's
dict, which ``signoff audit verify`` and third-party re-verification of an export compute."""

from __future__ import annotations

import enum
import hashlib
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from signoff.model import AuditEvent
from signoff.store.audit import (
    FIELDS,
    GENESIS_HASH,
    canonical_json,
    record_fields,
    row_hash,
    seal_row,
    unsealed,
    verify_chain,
)

T0 = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)
COLUMNS = FIELDS[FIELDS.index("request_id") : FIELDS.index("data")]  # the optional text columns

# every code point (lone surrogates, controls, bidi overrides, astral), or no value
column_text = st.none() | st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF))


class Shade(enum.StrEnum):
    DARK = "dark\u202e"


def _stored_form_hash(row: Any) -> str:
    """What verification computes: the canonical dict of the re-read record, hashed."""
    return row_hash(record_fields(row.record()))


@settings(max_examples=300, deadline=None)
@given(
    columns=st.fixed_dictionaries({name: column_text for name in COLUMNS}),
    event=st.text(min_size=1),
    seq=st.integers(min_value=1, max_value=2**63),
    prev=st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
    micro=st.integers(min_value=0, max_value=10**12),
)
def test_field_by_field_text_is_the_canonical_encoding_of_the_row(
    columns: dict[str, str | None], event: str, seq: int, prev: str, micro: int
) -> None:
    at = T0 + timedelta(microseconds=micro)
    sealed = seal_row(AuditEvent(event=event, at=at, data={"n": 1}, **columns), seq, prev)  # type: ignore[arg-type]
    assert sealed.hash == _stored_form_hash(sealed)
    assert sealed.hash == row_hash({**sealed._asdict(), "data": {"n": 1}})


def test_a_column_of_another_type_takes_the_general_encoder() -> None:
    odd = AuditEvent(event="allowed", at=T0, tool=Shade.DARK, actor=7, rule=3.5)  # type: ignore[arg-type]
    fast = unsealed(odd).hashed(1, GENESIS_HASH)
    fields = {name: getattr(odd, name) for name in ("actor", "agent", "event", "policy_hash")}
    fields |= {name: getattr(odd, name) for name in ("principal", "request_id", "rule")}
    fields |= {name: getattr(odd, name) for name in ("thread", "tool", "tool_call_id")}
    whole = {**fields, "at": "2026-11-27T03:00:00.000000Z", "data": {}, "seq": 1}
    assert fast == canonical_json({**whole, "prev_hash": GENESIS_HASH})
    assert '"actor":7' in fast and '"rule":3.5' in fast


def test_the_body_matches_the_dict_encoding_for_a_typical_event() -> None:
    event = AuditEvent(
        event="decided",
        at=datetime(2026, 11, 27, 4, 5, 6, 7, tzinfo=timezone(timedelta(hours=2))),
        request_id="req_1",
        thread="t-\u00e9",
        tool="delete_record",
        tool_call_id="c\n1",
        actor='alice "the dba"',
        principal=None,
        agent="bot",
        rule="prod-delete",
        policy_hash="ab" * 32,
        data={"decision": "approve"},
    )
    row = seal_row(event, 1, GENESIS_HASH)
    body = {**row._asdict(), "data": {"decision": "approve"}}
    del body["hash"]
    expected = hashlib.sha256(canonical_json(body).encode("ascii")).hexdigest()
    assert row.hash == expected
    assert row.at == "2026-11-27T02:05:06.000007Z"
    assert verify_chain([row.record()]).ok


@settings(max_examples=200, deadline=None)
@given(moment=st.datetimes(timezones=st.just(UTC)))
def test_iso_utc_of_a_utc_time_is_the_converted_form(moment: datetime) -> None:
    from signoff.store.audit import iso_utc

    naive = moment.replace(tzinfo=None)
    assert iso_utc(moment) == naive.isoformat(timespec="microseconds") + "Z"
    other_utc = timezone(timedelta(0), "another UTC object")  # the slow path
    assert iso_utc(moment) == iso_utc(naive) == iso_utc(moment.astimezone(other_utc))
