"""Fail closed on storage: a store that cannot be written never lets a call run unrecorded
(issue: hardening I, item 8)."""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from signoff import Denied, Gate, StoreError
from signoff.model import AuditEvent
from signoff.store import SQLiteStore
from tests.gate.conftest import make_policy, wait_until


@pytest.fixture
def immutable(tmp_path: Path) -> Iterator[Any]:
    """``chattr +i`` a file (root ignores permission bits, not the immutable flag)."""
    marked: list[Path] = []

    def mark(path: Path) -> None:
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
        if done.returncode != 0:
            pytest.skip(f"chattr +i is not supported here: {done.stderr.decode().strip()}")
        marked.append(path)

    yield mark
    for path in marked:
        subprocess.run(["chattr", "-i", str(path)], check=False)


def test_a_read_only_store_fails_the_first_guarded_call_naming_the_file(
    tmp_path: Path, immutable: Any
) -> None:
    db = tmp_path / "signoff.db"
    _create(db)
    immutable(db)
    gate = Gate(make_policy(), SQLiteStore(db))
    ran: list[int] = []

    @gate.guard
    def get_price(symbol: str) -> int:  # allowed by the policy
        ran.append(1)
        return 1

    try:
        with pytest.raises(StoreError) as err:
            get_price("ACME")
        message = str(err.value)  # the schema check or the write probe, whichever fails first
        assert str(db) in message and "writable" in message
        assert ran == []
    finally:
        gate.close()


def _create(db: Path) -> None:
    gate = Gate(make_policy(), SQLiteStore(db))
    gate.start()
    gate.close()


class FlakyDisk(SQLiteStore):
    """A real SQLite store whose audit batches fail while ``full`` is set (a full disk)."""

    full = False

    def _write_audit_batch(self, conn: sqlite3.Connection, events: list[AuditEvent]) -> None:
        if self.full:
            raise sqlite3.OperationalError("database or disk is full")
        super()._write_audit_batch(conn, events)


def test_allowed_calls_are_denied_while_the_audit_writer_fails_and_run_again_after(
    tmp_path: Path,
) -> None:
    store = FlakyDisk(tmp_path / "signoff.db")
    gate = Gate(make_policy(), store)
    ran: list[str] = []

    @gate.guard
    def get_price(symbol: str) -> int:
        ran.append(symbol)
        return 1

    try:
        assert get_price("A") == 1
        store.full = True
        get_price("B")  # its audit row is queued; the batch fails when it is written
        wait_until(lambda: store.audit_failure() is not None)
        with pytest.raises(Denied) as err:
            get_price("C")
        assert err.value.verdict.rule == "audit_unavailable"
        assert "disk is full" in str(err.value)
        store.full = False
        wait_until(lambda: store.audit_failure() is None)
        assert get_price("D") == 1
        assert ran == ["A", "B", "D"]
        # nothing was lost: B's row was retried, C's denial recorded too
        gate.run_sync(store.flush_audit())
        events = [(e.event, e.rule) for e in gate.run_sync(store.read_audit())]
        assert events.count(("allowed", "get_price.default")) == 3
        assert ("denied", "audit_unavailable") in events
    finally:
        gate.close()
