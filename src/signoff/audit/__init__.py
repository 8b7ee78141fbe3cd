"""The audit log anchored outside the database, and what ``signoff audit verify`` checks.

The hash chain (:mod:`signoff.store.audit`) shows a row changed in place; it cannot show a
chain rebuilt with recomputed hashes, or a deleted tail, because whoever can write the
database can do both. So the process holding ``audit.key`` (``signoff serve``, or the
``signoff audit anchor`` sidecar) signs the log's head — ``{seq, hash, at, signer}``,
HMAC-SHA256 — and writes it to a sink outside the database (:mod:`.sinks`), and
``signoff audit verify`` checks the log against those checkpoints and every request row
against its events (:mod:`.verify`). docs/security.md says what that proves.
"""

from __future__ import annotations

from signoff.audit.anchorer import Anchorer
from signoff.audit.checkpoints import BadLine, Checkpoint, read_checkpoints, sign, signature_ok
from signoff.audit.settings import AnchorTarget, AuditSettings, parse_anchor
from signoff.audit.sinks import AnchorError, FileSink, HttpSink, Sink, open_sink
from signoff.audit.verify import AuditReport, Finding, verify_log

__all__ = [
    "AnchorError",
    "AnchorTarget",
    "Anchorer",
    "AuditReport",
    "AuditSettings",
    "BadLine",
    "Checkpoint",
    "FileSink",
    "Finding",
    "HttpSink",
    "Sink",
    "open_sink",
    "parse_anchor",
    "read_checkpoints",
    "sign",
    "signature_ok",
    "verify_log",
]
