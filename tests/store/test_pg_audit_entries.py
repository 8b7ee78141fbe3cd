"""``audit_append``'s entries as JSON text (``store/_pg_audit.py``): built from the strings of
``audit.unsealed``, they must parse to the same entries as the dict form, and their cut text
must hash as the shared sealing code does."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from enum import Enum

import pytest

from signoff.model import AuditEvent
from signoff.store._pg_audit import entries_json, entry
from signoff.store.audit import canonical_json, seal


class Color(Enum):
    RED = "red"


AT = datetime(2026, 11, 27, 10, 0, 0, 123, tzinfo=UTC)
EVENTS = [
    AuditEvent(
        event="decided",
        at=AT,
        request_id="r\u00e9q",
        actor='a"b\\c',
        data={"z": [1, 2.5, None], "a": {"\u2603": AT}, "bidi": "\u202e"},
    ),
    AuditEvent(event="created", at=AT, thread="t\nx", tool="send_email", data={}),
    AuditEvent(
        event="allowed",
        at=datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=5))),
        data={"k": {1: "one", 10: "ten", 2: "two"}, "s": {3, 1}, "c": Color.RED},
    ),
    AuditEvent(event="denied", data={"nested": [[{"deep": [1, {"x": "\x00"}]}]]}),
]


def test_the_json_text_parses_to_the_entries() -> None:
    assert json.loads(entries_json(EVENTS)) == [entry(e) for e in EVENTS]
    assert entries_json([]) == "[]"


@pytest.mark.parametrize("event", EVENTS, ids=[e.event for e in EVENTS])
def test_the_cut_text_is_the_sealed_rows_canonical_json(event: AuditEvent) -> None:
    (cut,) = json.loads(entries_json([event]))
    sealed = seal(event, 41, "f" * 64)
    body = {k: v for k, v in sealed.to_wire().items() if k != "hash"}
    body["at"] = cut["at"]
    assert cut["p"] + "f" * 64 + cut["m"] + "41" + cut["s"] == canonical_json(body)
    assert cut["data"] == sealed.data
