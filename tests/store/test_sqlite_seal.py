"""Audit rows sealed in two steps (``store/_sqlite_seal.py``: text on the caller's loop, the
chain link on the writer) are byte for byte the rows ``seal_row`` seals in one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from signoff.model import AuditEvent
from signoff.store._sqlite_seal import chain, unsealed_all
from signoff.store.audit import GENESIS_HASH, seal_rows, verify_chain
from tests.store.test_audit_seal_data import CASES

T0 = datetime(2026, 11, 27, 3, 0, 0, 123, tzinfo=UTC)


def events(data: dict[str, Any]) -> list[AuditEvent]:
    return [
        AuditEvent(event="allowed", at=T0, data=data),  # every optional field None
        AuditEvent(
            event="decided",
            at=datetime(2026, 11, 27, 4, 5, 6),  # naive: taken as UTC
            request_id="r-1",
            thread='th "quoted" \\ \u202e bidi',
            tool="db.delete",
            tool_call_id="call-1",
            actor="ana@example.com",
            principal="ünïcode",
            agent="agent-7",
            rule="prod-deletes",
            policy_hash="p" * 64,
            data=data,
        ),
    ]


@pytest.mark.parametrize("data", CASES)
@pytest.mark.parametrize("after", [(0, GENESIS_HASH), (41, "a" * 64)])
def test_two_step_sealing_gives_the_rows_seal_row_gives(
    data: dict[str, Any], after: tuple[int, str]
) -> None:
    expected = [(*row, "origin-1") for row in seal_rows(events(data), *after)]
    assert chain(unsealed_all(events(data)), *after, "origin-1") == expected


def test_a_two_step_chain_verifies() -> None:
    rows = seal_rows(events({"x": 1}) * 3, 0, GENESIS_HASH)
    assert chain(unsealed_all(events({"x": 1}) * 3), 0, GENESIS_HASH, "o") == [
        (*row, "o") for row in rows
    ]
    assert verify_chain([row.record() for row in rows]).ok
