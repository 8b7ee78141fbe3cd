"""An event's data is hashed as its stored, JSON-native text whether or not ``seal_row``
takes the shortcut for data that is plain JSON already (signoff/store/audit.py)."""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Any

import pytest

from signoff.model import AuditEvent
from signoff.store.audit import GENESIS_HASH, canonical_json, json_native, seal_row, verify_chain

T0 = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


CASES: list[dict[str, Any]] = [
    {},
    {"table": "orders", "record_id": 1, "ratio": 0.1, "ok": True, "none": None},
    {"nested": {"b": [1, {"z": 1, "a": 2}], "a": ("t", "u")}, "é": "ünïcode \u202e"},
    {"when": T0, "color": Color.RED, "level": Level.HIGH},
    {"keys": {10: "ten", 9: "nine"}},  # int keys sort differently once they are text
    {"set": {"b", "a"}, "float": float("inf")},
]


@pytest.mark.parametrize("data", CASES)
def test_sealed_data_is_the_canonical_text_of_its_stored_form(data: dict[str, Any]) -> None:
    row = seal_row(AuditEvent(event="allowed", at=T0, tool="t", data=data), 1, GENESIS_HASH)
    assert row.data == (canonical_json(json_native(data)) if data else "{}")
    assert verify_chain([row.record()]).ok  # the hash is that of the re-read row


def test_data_nested_deeper_than_the_recursion_limit_takes_the_round_trip() -> None:
    deep: Any = "leaf"
    for _ in range(50):
        deep = [deep]
    row = seal_row(AuditEvent(event="allowed", at=T0, data={"deep": deep}), 1, GENESIS_HASH)
    assert verify_chain([row.record()]).ok
