"""The sweeper looks again when a new request is due before its next wake-up, and only then."""

from __future__ import annotations

from datetime import timedelta

from signoff import Gate, ToolCall
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
