"""``signoff audit verify``: the chain, the checkpoints, and every request against its events.

One pass over the log (constant memory for the chain; one small :class:`Trail` per request):

1. **The chain** — every row's hash and link (:class:`~signoff.store.audit.ChainVerifier`).
   Proves no row was changed, inserted or removed *in the middle* without recomputing the
   hashes after it.
2. **The checkpoints** — each signature checks with ``audit.key``, and each checkpointed
   ``(seq, hash)`` is still in the log. Proves no row up to the last checkpoint was
   changed or removed, even by someone who recomputed every hash after (a rebuilt chain),
   and that the tail up to it is still there.
3. **``--expect-head SEQ:HASH``** — the same for one pair noted elsewhere (a ticket, a
   previous run's output).
4. **Requests** — every request row tells the story its audit events tell (status,
   each call's outcome and who gave it, execution); events of a request whose row is gone.

Runs against a live store: a request that looks inconsistent is re-read between two reads
of its events, so a decision committed mid-scan is not reported.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from signoff.audit.checkpoints import BadLine, Checkpoint, signature_ok
from signoff.audit.trails import Trail, disagreements
from signoff.model import ApprovalRequest, AuditVerification, RequestQuarantined
from signoff.store import AuditQuery, Store
from signoff.store.audit import GENESIS_HASH, ChainVerifier

PAGE = 5000
REQUEST_PAGE = 500
_RECHECKS = 3


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing that is wrong: ``kind`` is chain, checkpoint, tail, rewritten, expect_head
    or request."""

    kind: str
    message: str
    seq: int | None = None
    request_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message": self.message,
            "seq": self.seq,
            "request_id": self.request_id,
        }


@dataclass(slots=True)
class AuditReport:
    """What :func:`verify_log` found; ``ok`` when there is no finding."""

    head_seq: int = 0
    head_hash: str = GENESIS_HASH
    chain: AuditVerification = field(default_factory=lambda: AuditVerification(True, 0))
    checkpoints: int = 0
    signatures: str = "none"  # verified | unchecked | none
    anchored_seq: int | None = None  # the highest checkpointed seq still in the log
    requests_checked: int = 0
    findings: list[Finding] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def unanchored(self) -> int:
        """Rows after the last checkpoint: what a rewrite could still change unnoticed."""
        return self.head_seq - (self.anchored_seq or 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "head": {"seq": self.head_seq, "hash": self.head_hash},
            # the chain's result at the top level too, as before checkpoints existed
            "checked": self.chain.checked,
            "broken_seq": self.chain.broken_seq,
            "problem": self.chain.problem,
            "chain": {
                "ok": self.chain.ok,
                "checked": self.chain.checked,
                "broken_seq": self.chain.broken_seq,
                "problem": self.chain.problem,
            },
            "checkpoints": {
                "count": self.checkpoints,
                "signatures": self.signatures,
                "anchored_seq": self.anchored_seq,
                "unanchored_rows": self.unanchored,
            },
            "requests": {"checked": self.requests_checked},
            "findings": [f.to_json() for f in self.findings],
            "warnings": self.warnings,
        }


async def verify_log(
    store: Store,
    *,
    checkpoints: Iterable[tuple[int, Checkpoint]] | None = None,
    bad_lines: Iterable[BadLine] = (),
    key: bytes | None = None,
    expect_head: tuple[int, str] | None = None,
) -> AuditReport:
    """Verify ``store``'s audit log; ``checkpoints`` are (line number, checkpoint) pairs."""
    report = AuditReport()
    trusted = _checkpoints(report, checkpoints, bad_lines, key)
    wanted = {cp.seq for _, cp in trusted}
    if expect_head is not None:
        wanted.add(expect_head[0])
    trails, hashes = await _scan(store, report, wanted)
    _compare_checkpoints(report, trusted, hashes)
    if expect_head is not None:
        _compare_expected(report, expect_head, hashes)
    await _cross_check(store, report, trails)
    return report


def _checkpoints(
    report: AuditReport,
    checkpoints: Iterable[tuple[int, Checkpoint]] | None,
    bad_lines: Iterable[BadLine],
    key: bytes | None,
) -> list[tuple[int, Checkpoint]]:
    """The checkpoints whose positions are checked: all of them without a key, only the
    correctly signed ones with it (a forged one is a finding of its own)."""
    if checkpoints is None:
        report.warnings.append(
            "no checkpoints: a chain rebuilt with recomputed hashes, or a deleted tail, "
            "cannot be detected (set audit.anchor, or pass --anchors FILE)"
        )
        return []
    for bad in bad_lines:
        if bad.torn:
            report.warnings.append(f"checkpoint line {bad.line} is unfinished: {bad.problem}")
        else:
            report.findings.append(
                Finding(
                    "checkpoint", f"checkpoint line {bad.line} is not a checkpoint: {bad.problem}"
                )
            )
    given = list(checkpoints)
    report.checkpoints = len(given)
    if not given:
        return []
    if key is None:
        report.signatures = "unchecked"
        report.warnings.append(
            "checkpoint signatures not checked (no audit.key): whoever can rewrite both the "
            "database and the checkpoint file could forge both"
        )
        return given
    report.signatures = "verified"
    trusted = []
    for line, checkpoint in given:
        if signature_ok(key, checkpoint):
            trusted.append((line, checkpoint))
        else:
            report.findings.append(
                Finding(
                    "checkpoint",
                    f"checkpoint line {line} (seq {checkpoint.seq}, signer "
                    f"{checkpoint.signer!r}) has a bad signature: forged, changed, or signed "
                    "with another key",
                    seq=checkpoint.seq,
                )
            )
    return trusted


async def _scan(
    store: Store, report: AuditReport, wanted: set[int]
) -> tuple[dict[str, Trail], dict[int, str]]:
    """Walk the whole log once: chain, the hashes at ``wanted`` seqs, per-request trails."""
    await store.flush_audit()
    chain = ChainVerifier()
    trails: dict[str, Trail] = {}
    hashes: dict[int, str] = {}
    after = 0
    while batch := await store.read_audit(AuditQuery(after_seq=after, limit=PAGE)):
        for record in batch:
            chain.feed(record)
            if record.seq in wanted:
                hashes[record.seq] = record.hash
            if record.request_id is not None:
                trails.setdefault(record.request_id, Trail()).feed(record)
        after = batch[-1].seq
        report.head_seq, report.head_hash = after, batch[-1].hash
    report.chain = chain.result()
    if not report.chain.ok:
        report.findings.append(
            Finding(
                "chain",
                f"audit log broken at row {report.chain.broken_seq}: {report.chain.problem}",
                seq=report.chain.broken_seq,
            )
        )
    return trails, hashes


def _compare_checkpoints(
    report: AuditReport, trusted: list[tuple[int, Checkpoint]], hashes: dict[int, str]
) -> None:
    for line, cp in trusted:
        where = f"checkpoint line {line} (seq {cp.seq}, {cp.at}, signer {cp.signer!r})"
        if cp.seq > report.head_seq:
            report.findings.append(
                Finding(
                    "tail",
                    f"{where}: the log ends at seq {report.head_seq}, so rows "
                    f"{report.head_seq + 1}..{cp.seq} (at least) were deleted",
                    seq=cp.seq,
                )
            )
        elif hashes.get(cp.seq) != cp.hash:
            found = hashes.get(cp.seq)
            report.findings.append(
                Finding(
                    "rewritten",
                    f"{where}: row {cp.seq} "
                    + (f"has hash {found[:16]}…, not {cp.hash[:16]}…" if found else "is missing")
                    + ": the log up to it was rewritten (hashes recomputed) or rows removed",
                    seq=cp.seq,
                )
            )
        else:
            report.anchored_seq = max(report.anchored_seq or 0, cp.seq)


def _compare_expected(
    report: AuditReport, expected: tuple[int, str], hashes: dict[int, str]
) -> None:
    seq, digest = expected
    if seq > report.head_seq:
        message = f"expected row {seq}, but the log ends at seq {report.head_seq}"
    elif hashes.get(seq) != digest:
        found = hashes.get(seq)
        message = (
            f"row {seq} has hash {found}, not the expected {digest}"
            if found
            else (f"row {seq} is missing")
        )
    else:
        return
    report.findings.append(Finding("expect_head", message, seq=seq))


async def _cross_check(store: Store, report: AuditReport, trails: dict[str, Trail]) -> None:
    """Every readable request row against its trail; trails whose row is gone."""
    seen: set[str] = set()
    offset = 0
    while page := await store.list_requests(limit=REQUEST_PAGE, offset=offset):
        offset += len(page)
        for request in page:
            if request.id in seen:
                continue  # newer rows pushed it to the next page
            seen.add(request.id)
            report.requests_checked += 1
            if disagreements(request, trails.get(request.id, Trail())):
                await _recheck(store, report, request.id)
    for request_id, trail in trails.items():
        if request_id not in seen:
            await _orphan(store, report, request_id, trail)


async def _recheck(store: Store, report: AuditReport, request_id: str) -> None:
    """Re-read the row between two reads of its events: if no event came in between, the
    row and those events are one consistent state (each change commits both together)."""
    problems: list[str] = []
    for _ in range(_RECHECKS):
        before = await _trail(store, request_id)
        request = await _read(store, report, request_id)
        if request is None:
            return
        after = await _trail(store, request_id)
        problems = disagreements(request, after)
        if before.last_seq == after.last_seq:
            break
    for problem in problems:
        report.findings.append(
            Finding("request", f"request {request_id}: {problem}", request_id=request_id)
        )


async def _orphan(store: Store, report: AuditReport, request_id: str, trail: Trail) -> None:
    request = await _read(store, report, request_id)
    if request is None:
        return
    report.requests_checked += 1  # created after the listing began
    if disagreements(request, trail):
        await _recheck(store, report, request_id)


async def _read(store: Store, report: AuditReport, request_id: str) -> ApprovalRequest | None:
    try:
        request = await store.get_request(request_id)
    except RequestQuarantined as exc:
        report.warnings.append(
            f"request {request_id} cannot be read ({exc.reason}): not cross-checked"
        )
        return None
    if request is None:
        report.findings.append(
            Finding(
                "request",
                f"request {request_id}: the audit log records it, but the requests table "
                "has no such row (deleted)",
                request_id=request_id,
            )
        )
    return request


async def _trail(store: Store, request_id: str) -> Trail:
    trail = Trail()
    after = 0
    while batch := await store.read_audit(
        AuditQuery(after_seq=after, limit=PAGE, request_id=request_id)
    ):
        for record in batch:
            trail.feed(record)
        after = batch[-1].seq
    return trail
