"""The audit hash chain, shared by every backend, and the export formats.

Each written row is sealed with ``hash = sha256(canonical_json(row without hash))`` where the
row includes ``prev_hash``, the hash of the row before it (64 zeros for the first row). Editing,
inserting or deleting a row therefore breaks either its own hash or the next row's link, and
``signoff audit verify`` finds the first such row.

Canonical JSON is ``json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=True)``,
with timestamps as ISO-8601 UTC with microseconds and a ``Z`` (``2026-11-21T23:50:12.000123Z``).
A JSONL export line is exactly the hashed object plus ``hash``, so anyone can re-verify an
export without signoff: drop ``hash``, dump canonically, sha256, compare.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, is_dataclass
from datetime import UTC, date, datetime
from enum import Enum
from typing import Any, NamedTuple

from signoff.model import AuditEvent, AuditRecord, AuditVerification

GENESIS_HASH = "0" * 64
FIELDS = (
    "seq",
    "event",
    "at",
    "request_id",
    "thread",
    "tool",
    "tool_call_id",
    "actor",
    "principal",
    "agent",
    "rule",
    "policy_hash",
    "data",
    "prev_hash",
    "hash",
)


# "00" to "99": a time's fields written two digits at a time by lookup (every audit row)
_TWO_DIGITS: tuple[str, ...] = tuple(f"{n:02d}" for n in range(100))


def iso_utc(moment: datetime) -> str:
    """Fixed-width ISO-8601 UTC text; naive datetimes are taken to be UTC already."""
    if moment.tzinfo is UTC:  # the common case (utcnow): no conversion, no "+00:00" to cut
        # looked up, not formatted: half the instructions of "%04d-%02d…" % (seven ints),
        # a third of isoformat(timespec=)'s (callgrind)
        d, m = _TWO_DIGITS, moment
        year, micro = m.year, m.microsecond
        return (
            f"{d[year // 100]}{d[year % 100]}-{d[m.month]}-{d[m.day]}T{d[m.hour]}:"
            f"{d[m.minute]}:{d[m.second]}.{d[micro // 10000]}{d[micro // 100 % 100]}"
            f"{d[micro % 100]}Z"
        )
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return model_dump(mode="json")
    return str(value)


# One encoder for every call: json.dumps with non-default options builds a new one each time.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=_json_default
)
# json's C encoder, as _CANONICAL.encode builds it for each call (its own dict of containers
# being encoded, to refuse a circular value), called directly: encode() first runs two
# Python-level methods and defines a closure the C encoder never uses
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)


def canonical_json(value: Any) -> str:
    if _c_make_encoder is None or type(value) is str:  # a pure-Python json: its own path
        return _CANONICAL.encode(value)
    return "".join(_c_encoder({})(value, 0))


def _c_encoder(markers: dict[int, Any] | None) -> Any:
    """json's C encoder with the canonical options; ``markers``: the dict it records the
    containers being encoded in (to refuse a circular value), or None for none."""
    return _c_make_encoder(markers, _json_default, _ascii_string, None, ":", ",", True, False, True)


def json_native(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` as it reads back from storage (datetimes as text, tuples as lists, ...).

    Hashing the normalized form makes a row's hash the same when written and when re-read.
    """
    if not data:
        return {}
    native: dict[str, Any] = json.loads(canonical_json(data))
    return native


def row_hash(row: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON of a row's fields (everything but ``hash``)."""
    body = {name: row[name] for name in FIELDS if name != "hash"}
    return hashlib.sha256(canonical_json(body).encode("ascii")).hexdigest()


def record_fields(record: AuditRecord) -> dict[str, Any]:
    """The record as the JSON object that is hashed (plus its ``hash``)."""
    return {
        "seq": record.seq,
        "event": record.event,
        "at": iso_utc(record.at),
        "request_id": record.request_id,
        "thread": record.thread,
        "tool": record.tool,
        "tool_call_id": record.tool_call_id,
        "actor": record.actor,
        "principal": record.principal,
        "agent": record.agent,
        "rule": record.rule,
        "policy_hash": record.policy_hash,
        "data": record.data,
        "prev_hash": record.prev_hash,
        "hash": record.hash,
    }


_sha256 = hashlib.sha256


class SealedRow(NamedTuple):
    """An event sealed into the chain, as stored: timestamps and ``data`` as canonical text."""

    seq: int
    event: str
    at: str
    request_id: str | None
    thread: str | None
    tool: str | None
    tool_call_id: str | None
    actor: str | None
    principal: str | None
    agent: str | None
    rule: str | None
    policy_hash: str | None
    data: str
    prev_hash: str
    hash: str

    def record(self) -> AuditRecord:
        return AuditRecord(
            **{**self._asdict(), "at": parse_iso(self.at), "data": json.loads(self.data)}
        )


_JSON_SCALARS: frozenset[type] = frozenset({str, int, float, bool, type(None)})


def _json_plain(value: Any) -> bool:
    """Only JSON's own types, every dict key a string: the canonical text of such a value is
    the canonical text of its stored (re-read) form, so it needs no round trip."""
    kind = type(value)
    # plain loops, scalars checked inline: no generator or call per value (on every write)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return False
            if type(item) not in _JSON_SCALARS and not _json_plain(item):
                return False
        return True
    if kind is list or kind is tuple:
        for item in value:
            if type(item) not in _JSON_SCALARS and not _json_plain(item):
                return False
        return True
    return kind in _JSON_SCALARS


def _canonical_data(data: Mapping[str, Any]) -> str:
    """The canonical text of ``data`` in its JSON-native form (what is stored and hashed).

    Anything else (datetimes, enums, models, non-string keys, whose order can change once
    they are strings) takes the round trip through :func:`json_native`.
    """
    if not data:
        return "{}"
    try:
        plain = _json_plain(data)
    except RecursionError:
        plain = False
    if not plain:
        return canonical_json(json_native(data))
    if _PLAIN is None:
        return canonical_json(data)
    return "".join(_PLAIN(data, 0))


def seal_row(event: AuditEvent, seq: int, prev_hash: str) -> SealedRow:
    """Give ``event`` its place in the chain: sequence number, link and hash.

    ``data`` is serialized once: its canonical text (of its stored, JSON-native form) is both
    what is stored and what is spliced into the hashed object (:func:`unsealed`).
    """
    item = unsealed(event)
    digest = _sha256(item.hashed(seq, prev_hash).encode("ascii")).hexdigest()
    return _new_row(SealedRow, (seq, *item.columns, item.data, prev_hash, digest))


# json's own C string encoder (what the canonical encoder calls for every str with
# ensure_ascii=True), so a field's text is exactly the canonical encoder's
_ascii_string: Callable[[str], str] = json.encoder.encode_basestring_ascii
json_string = _ascii_string  # a ``str``'s canonical JSON text (for the SQLite writer's chain)

# The canonical encoder once for every plain value: _json_plain has walked it to the end, so
# it holds no cycle and needs no record of the containers being encoded (which is all a C
# encoder would keep from one call to the next); the same text as canonical_json.
_PLAIN: Any = None if _c_make_encoder is None else _c_encoder(None)


class Unsealed(NamedTuple):
    """Everything of an event's sealed row that does not depend on its place in the chain.

    Sealing in two steps lets a store build this before it takes the chain's head (the
    SQLite writer chains in commit order and holds the GIL while it does): the chain step
    then only splices ``prev_hash`` and ``seq`` in and hashes (:meth:`hashed`).
    """

    front: str  # the hashed text up to the value of "prev_hash"
    middle: str  # between the value of "prev_hash" and the value of "seq"
    back: str  # after the value of "seq"
    columns: tuple[Any, ...]  # event … policy_hash, as stored
    data: str  # the canonical text of the data, as stored

    def hashed(self, seq: int, prev_hash: str) -> str:
        """The canonical JSON of the row without ``hash``: what its hash is taken of."""
        return f"{self.front}{_text(prev_hash)}{self.middle}{_text(seq)}{self.back}"


# SealedRow._make without its Python-level call: a named tuple is a tuple of its fields
_new_row: Callable[[type[SealedRow], tuple[Any, ...]], SealedRow] = tuple.__new__


# Unsealed(...) without the named tuple's Python-level __new__
_new_unsealed: Callable[[type[Unsealed], tuple[Any, ...]], Unsealed] = tuple.__new__


def _text(value: Any) -> str:
    """One column's canonical JSON: a ``str`` through json's own string encoder, ``None``
    as ``null``, an ``int`` as itself; anything else (a ``str`` subclass…) through the
    canonical encoder, so the text is always exactly what encoding the whole row gives."""
    kind = type(value)
    if kind is str:
        return _ascii_string(value)
    if value is None:
        return "null"
    if kind is int:
        return str(value)
    return canonical_json(value)


def unsealed(event: AuditEvent) -> Unsealed:
    """The chain-independent part of ``event``'s row. The hashed object's keys sort as
    ``actor, agent, at, data, event, policy_hash, prev_hash, principal, request_id, rule,
    seq, thread, tool, tool_call_id``; it is written field by field (no dict built and
    encoded per event)."""
    at = iso_utc(event.at)
    data = _canonical_data(event.data)
    columns = (
        event.event,
        at,
        event.request_id,
        event.thread,
        event.tool,
        event.tool_call_id,
        event.actor,
        event.principal,
        event.agent,
        event.rule,
        event.policy_hash,
    )
    # each column's text: a str straight through json's C string encoder, the rest by _text
    ev, at_, req, thread, tool, call, actor, principal, agent, rule, policy = [
        _ascii_string(c) if type(c) is str else "null" if c is None else _text(c) for c in columns
    ]
    front = (
        f'{{"actor":{actor},"agent":{agent},"at":{at_},"data":{data},"event":{ev},'
        f'"policy_hash":{policy},"prev_hash":'
    )
    middle = f',"principal":{principal},"request_id":{req},"rule":{rule},"seq":'
    back = f',"thread":{thread},"tool":{tool},"tool_call_id":{call}}}'
    return _new_unsealed(Unsealed, (front, middle, back, columns, data))


def seal_rows(events: Iterable[AuditEvent], last_seq: int, last_hash: str) -> list[SealedRow]:
    """Chain ``events`` after the row ``(last_seq, last_hash)`` (``(0, GENESIS_HASH)`` if none)."""
    rows = []
    for event in events:
        row = seal_row(event, last_seq + 1, last_hash)
        rows.append(row)
        last_seq, last_hash = row.seq, row.hash
    return rows


def seal(event: AuditEvent, seq: int, prev_hash: str) -> AuditRecord:
    """:func:`seal_row` as an :class:`AuditRecord` (what stores without text columns keep)."""
    return seal_row(event, seq, prev_hash).record()


def seal_all(events: Iterable[AuditEvent], last_seq: int, last_hash: str) -> list[AuditRecord]:
    """Chain ``events`` after the row ``(last_seq, last_hash)`` (``(0, GENESIS_HASH)`` if none)."""
    return [row.record() for row in seal_rows(events, last_seq, last_hash)]


class ChainVerifier:
    """Checks rows fed in ``seq`` order, in constant memory (a store may stream millions)."""

    def __init__(self) -> None:
        self.checked = 0
        self._last_seq = 0
        self._last_hash = GENESIS_HASH
        self.broken_seq: int | None = None
        self.problem: str | None = None

    def feed(self, record: AuditRecord) -> bool:
        """Check one row; False (and stop caring) once the chain is broken."""
        if self.problem is not None:
            return False
        problem = self._problem(record)
        if problem is not None:
            self.broken_seq, self.problem = record.seq, problem
            return False
        self.checked += 1
        self._last_seq, self._last_hash = record.seq, record.hash
        return True

    def _problem(self, record: AuditRecord) -> str | None:
        expected = self._last_seq + 1
        if record.seq != expected:
            if self._last_seq == 0:
                return f"gap in seq: the log starts at {record.seq} instead of 1 (rows are missing)"
            return f"gap in seq: expected {expected} after {self._last_seq}, found {record.seq}"
        if record.prev_hash != self._last_hash:
            return (
                f"broken link: prev_hash does not match the hash of row {self._last_seq} "
                "(a row was removed, inserted or rewritten)"
            )
        if row_hash(record_fields(record)) != record.hash:
            return "hash mismatch: the row's content was changed after it was written"
        return None

    def result(self) -> AuditVerification:
        return AuditVerification(
            ok=self.problem is None,
            checked=self.checked,
            broken_seq=self.broken_seq,
            problem=self.problem,
        )


def verify_chain(records: Iterable[AuditRecord]) -> AuditVerification:
    """Walk ``records`` (in seq order, from seq 1) and report the first broken row."""
    verifier = ChainVerifier()
    for record in records:
        if not verifier.feed(record):
            break
    return verifier.result()


def to_jsonl(records: Iterable[AuditRecord]) -> str:
    """One canonical JSON object per line (re-verifiable without signoff, see module doc)."""
    return "".join(canonical_json(record_fields(r)) + "\n" for r in records)


def to_csv(records: Iterable[AuditRecord], *, header: bool = True) -> str:
    """CSV with one column per field; ``data`` as canonical JSON, empty cells for None.

    ``header=False`` lets an exporter append page after page to one file.
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if header:
        writer.writerow(FIELDS)
    for record in records:
        row = record_fields(record)
        row["data"] = canonical_json(row["data"])
        writer.writerow(["" if row[name] is None else row[name] for name in FIELDS])
    return out.getvalue()
