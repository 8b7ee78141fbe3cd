"""The audit-rewrite attacks of issue 12 (item 3), on real SQLite and real PostgreSQL.

Someone with write access to the database drops the append-only triggers and then changes an
actor, deletes a decision, rebuilds the whole chain with recomputed hashes, deletes the last
rows, or flips a rejected call to approved in the requests table. Each test says which of
these ``audit verify`` finds from the database alone, and which need the signed checkpoints
(``audit.anchor`` + ``audit.key``) — docs/security.md, "What audit verify proves".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from signoff.audit import (
    Anchorer,
    AuditReport,
    FileSink,
    read_checkpoints,
    sign,
    verify_log,
)
from signoff.model import ApprovalRequest, AuditEvent, AuditRecord
from signoff.store import AuditQuery, SQLiteStore
from signoff.store.audit import GENESIS_HASH, seal_all
from tests.audit.conftest import KEY, Backend
from tests.store.factories import created_events, decide, decision, make_request


@dataclass
class History:
    approved: ApprovalRequest
    rejected: ApprovalRequest
    records: list[AuditRecord]
    anchors: Path

    def seq_of(self, event: str, request: ApprovalRequest) -> int:
        return next(r.seq for r in self.records if r.event == event and r.request_id == request.id)

    @property
    def head(self) -> tuple[int, str]:
        return self.records[-1].seq, self.records[-1].hash


async def make_history(backend: Backend, *, tail: int = 3) -> History:
    """Two decided requests and ``tail`` allowed calls, checkpointed at the head."""
    store = backend.store()
    await store.open()
    try:
        approved = make_request(thread="t-ok")
        await store.create_request(approved, created_events(approved))
        await decide(store, approved.id, decision(approver="alice"))
        rejected = make_request(thread="t-no")
        await store.create_request(rejected, created_events(rejected))
        await decide(store, rejected.id, decision(type="reject", approver="bob", message="no"))
        for i in range(tail):
            store.audit_nowait(AuditEvent(event="allowed", tool="get_price", data={"i": i}))
        anchors = backend.tmp / "anchors.jsonl"
        anchorer = Anchorer(store, FileSink(anchors), KEY, signer="test-replica")
        await store.flush_audit()
        assert await anchorer.anchor() is not None
        records = await store.read_audit(AuditQuery(limit=10_000))
    finally:
        await store.close()
    return History(approved, rejected, records, anchors)


async def verify(
    backend: Backend,
    anchors: Path | None = None,
    *,
    key: bytes | None = KEY,
    expect_head: tuple[int, str] | None = None,
) -> AuditReport:
    """``signoff audit verify`` as a new process would run it (the store opened afresh)."""
    store = backend.store()
    await store.open()
    try:
        checkpoints, bad = read_checkpoints(anchors) if anchors else (None, [])
        return await verify_log(
            store, checkpoints=checkpoints, bad_lines=bad, key=key, expect_head=expect_head
        )
    finally:
        await store.close()


def kinds(report: AuditReport) -> set[str]:
    return {f.kind for f in report.findings}


async def test_an_untouched_log_verifies_with_and_without_checkpoints(backend: Backend) -> None:
    history = await make_history(backend)
    bare = await verify(backend)
    assert bare.ok and bare.requests_checked == 2
    assert (bare.head_seq, bare.head_hash) == history.head
    assert any("no checkpoints" in w for w in bare.warnings)
    anchored = await verify(backend, history.anchors, expect_head=history.head)
    assert anchored.ok, anchored.findings
    assert (anchored.signatures, anchored.anchored_seq, anchored.unanchored) == (
        "verified",
        history.head[0],
        0,
    )


async def test_dropped_triggers_and_a_changed_actor_are_found_by_the_chain_alone(
    backend: Backend,
) -> None:
    history = await make_history(backend)
    seq = history.seq_of("decided", history.rejected)
    backend.tamper.drop_triggers()
    backend.tamper.set_actor(seq, "mallory")

    for report in (await verify(backend), await verify(backend, history.anchors)):
        assert kinds(report) == {"chain", "request"}
        assert report.chain.broken_seq == seq
        assert "hash mismatch" in (report.chain.problem or "")
        (mismatch,) = [f for f in report.findings if f.kind == "request"]
        assert "rejected by bob in the requests table, but the audit log's decisions " in (
            mismatch.message
        )


async def test_sqlite_recreates_dropped_triggers_when_it_opens(backend: Backend) -> None:
    await make_history(backend)
    backend.tamper.drop_triggers()
    assert backend.tamper.triggers() == set()
    store = backend.store()
    await store.open()
    await store.close()
    if backend.name == "sqlite":
        assert backend.tamper.triggers() == {"audit_no_update", "audit_no_delete"}
        assert isinstance(store, SQLiteStore)
        assert store.triggers_recreated == ("audit_no_update", "audit_no_delete")
    else:  # the app role may not create triggers: `db check` reports, `db upgrade` repairs
        assert backend.tamper.triggers() == set()
        assert (await _checked(backend))["audit_triggers"] is False


async def _checked(backend: Backend) -> dict[str, bool]:
    store = backend.store()
    try:
        report = await store.check()
    finally:
        await store.close()
    return {item.name: item.ok for item in report.items}


async def test_a_deleted_decision_event_is_found_by_the_chain_and_the_cross_check(
    backend: Backend,
) -> None:
    history = await make_history(backend)
    seq = history.seq_of("decided", history.rejected)
    backend.tamper.drop_triggers()
    backend.tamper.delete_rows(seq)

    report = await verify(backend)
    assert kinds(report) == {"chain", "request"}
    assert report.chain.broken_seq == seq + 1
    (finding,) = [f for f in report.findings if f.kind == "request"]
    assert finding.request_id == history.rejected.id
    assert "rejected in the requests table, but no decision in the audit log" in finding.message


def _rebuilt(records: list[AuditRecord], flipped: ApprovalRequest) -> list[AuditRecord]:
    """The whole log re-sealed from genesis, with ``flipped``'s rejection turned into an
    approval — what an attacker who knows the (public) hash scheme can compute."""
    events = []
    for r in records:
        data: dict[str, Any] = dict(r.data)
        if r.request_id == flipped.id and r.event == "decided":
            data["type"] = "approve"
            data.pop("message", None)
        if r.request_id == flipped.id and r.event == "resolved":
            data["outcomes"] = {call: "approved" for call in data["outcomes"]}
        events.append(
            AuditEvent(
                event=r.event,  # type: ignore[arg-type]
                at=r.at,
                request_id=r.request_id,
                thread=r.thread,
                tool=r.tool,
                tool_call_id=r.tool_call_id,
                actor=r.actor,
                principal=r.principal,
                agent=r.agent,
                rule=r.rule,
                policy_hash=r.policy_hash,
                data=data,
            )
        )
    return seal_all(events, 0, GENESIS_HASH)


def _approve(doc: dict[str, Any]) -> None:
    doc["calls"][0]["resolution"] = "approved"
    doc["calls"][0]["message"] = None
    doc["decisions"][0]["type"] = "approve"
    doc["decisions"][0]["message"] = None


async def test_a_rebuilt_chain_is_found_only_with_signed_checkpoints(backend: Backend) -> None:
    history = await make_history(backend)
    backend.tamper.drop_triggers()
    backend.tamper.replace_chain(_rebuilt(history.records, history.rejected))
    backend.tamper.edit_request(history.rejected.id, _approve)
    store = backend.store()
    await store.open()
    try:  # what `signoff show` now says
        shown = await store.get_request(history.rejected.id)
        assert shown is not None and shown.calls[0].resolution == "approved"
    finally:
        await store.close()

    # From the database alone the story is consistent: the chain verifies, rows match events.
    assert (await verify(backend)).ok

    report = await verify(backend, history.anchors)
    assert kinds(report) == {"rewritten"}
    assert f"row {history.head[0]} has hash" in report.findings[0].message
    assert report.anchored_seq is None

    noted = await verify(backend, expect_head=history.head)
    assert kinds(noted) == {"expect_head"}


async def test_checkpoints_rewritten_without_the_key_have_bad_signatures(
    backend: Backend,
) -> None:
    history = await make_history(backend)
    rebuilt = _rebuilt(history.records, history.rejected)
    backend.tamper.drop_triggers()
    backend.tamper.replace_chain(rebuilt)
    backend.tamper.edit_request(history.rejected.id, _approve)
    # the attacker rewrites the checkpoint file too, with a key of their own
    forged = sign(b"m" * 32, rebuilt[-1].seq, rebuilt[-1].hash, "test-replica")
    history.anchors.write_text(forged.line())

    report = await verify(backend, history.anchors)
    assert kinds(report) == {"checkpoint"}
    assert "bad signature" in report.findings[0].message
    # without the key the forged checkpoint is taken at its word, and says so
    unkeyed = await verify(backend, history.anchors, key=None)
    assert unkeyed.ok and unkeyed.signatures == "unchecked"
    assert any("signatures not checked" in w for w in unkeyed.warnings)


async def test_a_deleted_tail_is_found_up_to_the_last_checkpoint(backend: Backend) -> None:
    history = await make_history(backend, tail=4)
    seq, _ = history.head
    backend.tamper.drop_triggers()
    backend.tamper.delete_after(seq - 3)

    assert (await verify(backend)).ok  # a prefix of a chain is a valid chain
    report = await verify(backend, history.anchors)
    assert kinds(report) == {"tail"}
    assert f"rows {seq - 2}..{seq}" in report.findings[0].message
    assert report.head_seq == seq - 3


async def test_rows_after_the_last_checkpoint_are_outside_the_window(backend: Backend) -> None:
    history = await make_history(backend)
    store = backend.store()
    await store.open()
    try:
        for i in range(2):
            store.audit_nowait(AuditEvent(event="allowed", tool="get_price", data={"late": i}))
        await store.flush_audit()
    finally:
        await store.close()
    before = await verify(backend, history.anchors)
    assert before.ok and before.unanchored == 2

    backend.tamper.drop_triggers()
    backend.tamper.delete_after(history.head[0])
    after = await verify(backend, history.anchors)
    assert after.ok and after.unanchored == 0  # not detectable: after the last checkpoint


async def test_a_rejection_flipped_in_the_requests_table_is_found_without_key_or_checkpoints(
    backend: Backend,
) -> None:
    history = await make_history(backend)
    backend.tamper.edit_request(history.rejected.id, _approve)

    report = await verify(backend, key=None)
    assert kinds(report) == {"request"}
    (finding,) = report.findings
    assert finding.request_id == history.rejected.id
    seq = history.seq_of("resolved", history.rejected)
    assert finding.message == (
        f"request {history.rejected.id}: call call-1 is approved in the requests table, but "
        f"the audit log's `resolved` event (seq {seq}) says rejected"
    )


async def test_a_decider_changed_in_the_requests_table_is_found(backend: Backend) -> None:
    history = await make_history(backend)

    def by_mallory(doc: dict[str, Any]) -> None:
        doc["calls"][0]["resolved_by"] = "mallory"

    backend.tamper.edit_request(history.approved.id, by_mallory)
    report = await verify(backend)
    assert [f.request_id for f in report.findings] == [history.approved.id]
    assert "approved by mallory in the requests table" in report.findings[0].message


async def test_a_deleted_request_row_is_found(backend: Backend) -> None:
    history = await make_history(backend)
    for table in ("{call_keys}", "{requests}"):
        backend.tamper.q(
            f"DELETE FROM {table} WHERE {'request_id' if 'keys' in table else 'id'} = ?",
            history.approved.id,
        )
    report = await verify(backend)
    assert [f.request_id for f in report.findings] == [history.approved.id]
    assert "no such row" in report.findings[0].message
