"""Signed checkpoints: ``{seq, hash, at, signer}`` of the audit log's head, HMAC-SHA256'd.

The hash of row ``seq`` commits to every row before it, so one checkpoint kept where the
database's operators cannot reach pins the whole chain up to ``seq``: a deleted tail leaves
the checkpoint past the end, a chain rebuilt with recomputed hashes leaves a different hash at
``seq``. The HMAC (keyed with ``audit.key``) stops whoever rewrites the database from writing
matching checkpoints too — as long as they do not hold the key.

One checkpoint is one JSON line::

    {"at":"2026-11-23T10:00:00.000000Z","hash":"…","seq":1200,"sig":"hmac-sha256:…",
     "signer":"web-1:4242","v":1}

``sig`` is ``HMAC-SHA256(key, "signoff-audit-checkpoint\\n" + canonical JSON of the other
fields)`` in hex, so a receiver can check it with any HMAC library.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from signoff.model import utcnow
from signoff.store.audit import canonical_json, iso_utc

VERSION = 1
_DOMAIN = b"signoff-audit-checkpoint\n"
_SIG_PREFIX = "hmac-sha256:"
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One signed statement "row ``seq`` of the audit log had hash ``hash``"."""

    seq: int
    hash: str
    at: str  # ISO-8601 UTC, as in audit rows
    signer: str
    sig: str = ""

    def body(self) -> dict[str, Any]:
        """The signed fields."""
        return {
            "v": VERSION,
            "seq": self.seq,
            "hash": self.hash,
            "at": self.at,
            "signer": self.signer,
        }

    def to_json(self) -> dict[str, Any]:
        return {**self.body(), "sig": self.sig}

    def line(self) -> str:
        return canonical_json(self.to_json()) + "\n"


def _mac(key: bytes, body: dict[str, Any]) -> str:
    digest = hmac.new(key, _DOMAIN + canonical_json(body).encode("ascii"), hashlib.sha256)
    return _SIG_PREFIX + digest.hexdigest()


def sign(
    key: bytes, seq: int, row_hash: str, signer: str, at: datetime | None = None
) -> Checkpoint:
    """A checkpoint of row ``(seq, row_hash)``, signed with ``key``."""
    unsigned = Checkpoint(seq, row_hash, iso_utc(at or utcnow()), signer)
    return Checkpoint(seq, row_hash, unsigned.at, signer, _mac(key, unsigned.body()))


def signature_ok(key: bytes, checkpoint: Checkpoint) -> bool:
    """True when ``checkpoint`` was signed with ``key`` and not changed since."""
    return hmac.compare_digest(_mac(key, checkpoint.body()), checkpoint.sig)


def parse(value: Any) -> Checkpoint:
    """A checkpoint from its JSON object; ValueError naming what is wrong."""
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    if value.get("v") != VERSION:
        raise ValueError(f"unknown checkpoint version {value.get('v')!r}")
    seq, row_hash, at, signer, sig = (value.get(k) for k in ("seq", "hash", "at", "signer", "sig"))
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise ValueError("seq must be a positive integer")
    if not isinstance(row_hash, str) or not _HEX64.fullmatch(row_hash):
        raise ValueError("hash must be 64 hex digits")
    for name, text in (("at", at), ("signer", signer), ("sig", sig)):
        if not isinstance(text, str):
            raise ValueError(f"{name} must be text")
    extra = set(value) - {"v", "seq", "hash", "at", "signer", "sig"}
    if extra:
        raise ValueError(f"unknown field(s) {', '.join(sorted(extra))}")
    return Checkpoint(seq, row_hash, at, signer, sig)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line of a checkpoint file that is not a checkpoint. ``torn`` marks an unfinished
    last line (a crash mid-append), which is not evidence of tampering."""

    line: int
    problem: str
    torn: bool = False


def read_checkpoints(path: str | Path) -> tuple[list[tuple[int, Checkpoint]], list[BadLine]]:
    """Every checkpoint in a JSONL file with its line number, and the lines that are not."""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    found: list[tuple[int, Checkpoint]] = []
    bad: list[BadLine] = []
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        last = number == len(lines)  # no newline after it: the append never finished
        try:
            found.append((number, parse(json.loads(line))))
        except (ValueError, RecursionError) as exc:
            bad.append(BadLine(number, str(exc), torn=last))
    return found, bad
