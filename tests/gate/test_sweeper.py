"""The sweeper looks again when a new request is due before its next wake-up, and only then."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from signoff import Gate, StoreError, ToolCall
from signoff.gate import sweeper
from signoff.model import utcnow
from tests.gate.conftest import make_policy, wait_until
from tests.gate.snapshots import SnapshotCheckingStore


def test_a_request_due_before_the_next_pass_is_expired_on_time() -> None:
    # One pass an hour: only the poke of the 1-second "quick" request can expire it.
    gate = Gate(make_policy(), SnapshotCheckingStore(), sweep_interval=3600)
    try:
        gate.start()
        sub = gate.submit([ToolCall("quick", {})], gate.make_context("erin"))
        assert sub.request is not None
        rid = sub.request.id
        wait_until(lambda: gate._portal.run(gate.get(rid)).status == "expired")
    finally:
        gate.close()


def test_poke_for_a_request_due_after_the_next_pass_does_not_wake_the_sweeper() -> None:
    gate = Gate(make_policy(), SnapshotCheckingStore(), sweep_interval=3600)
    try:
        gate.start()
        sweeper = gate.sweeper
        wait_until(lambda: sweeper._wake_at is not None)  # the loop sleeps until then
        assert sweeper._wake is not None and sweeper._wake_at is not None
        sweeper.poke(sweeper._wake_at + timedelta(seconds=1))
        gate._portal.run(_yield())  # let a scheduled wake-up (if any) run
        assert not sweeper._wake.is_set()
        before = sweeper._wake_at
        sweeper.poke(utcnow())  # due sooner: a new pass runs and schedules a new wake-up
        wait_until(lambda: sweeper._wake_at not in (None, before))
    finally:
        gate.close()


async def _yield() -> None:
    return None


class PoisonStore(SnapshotCheckingStore):
    """A store whose updates of some requests always fail (not a quarantine: a bug, say)."""

    def __init__(self) -> None:
        super().__init__()
        self.poison: set[str] = set()

    async def update_request(self, request_id: str, mutate: Any) -> Any:
        if request_id in self.poison:
            raise StoreError(f"cannot update {request_id}")
        return await super().update_request(request_id, mutate)


def test_a_page_of_rows_that_cannot_be_updated_does_not_hide_the_due_rows_behind_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = PoisonStore()
    gate = Gate(make_policy(), store, sweep_interval=3600)
    try:
        gate.start()
        ctx = gate.make_context("erin")
        ids = []
        for n in range(sweeper.PAGE + 5):  # each due 1 s after it was made: in this order
            sub = gate.submit([ToolCall("quick", {"n": n})], ctx)
            assert sub.request is not None
            ids.append(sub.request.id)
        store.poison.update(ids[: sweeper.PAGE])  # the first page: every update fails
        later = utcnow() + timedelta(seconds=5)
        monkeypatch.setattr(sweeper, "utcnow", lambda: later)
        changed = gate._portal.run(gate.sweeper.sweep())
        statuses = [gate._portal.run(gate.get(rid)).status for rid in ids]
    finally:
        gate.close()
    assert changed == 5
    assert statuses[sweeper.PAGE :] == ["expired"] * 5
    assert set(statuses[: sweeper.PAGE]) == {"pending"}
