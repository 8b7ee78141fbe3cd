"""Unreadable request rows: quarantined, never fatal (DESIGN rule 12, "one bad row never
stops the system").

A row whose document no longer parses — nested past pydantic's recursion limit, corrupt
JSON, a field a manual edit broke, a document of another request — must not take down every
list, sweep, scrape or notification that touches it. Every backend reads rows through
:func:`parse_row`; a row that fails is *marked* in the database (``quarantined_at``,
``quarantine_reason``: it survives restarts and every replica sees it), its pending
notifications are cancelled, a ``quarantined`` audit event is written, and from then on:

* lists, the pending count and the sweeper's due query leave it out (plain SQL on the mark,
  no parsing);
* reading it by id raises :class:`~signoff.model.RequestQuarantined`, which says why and
  what to do (``signoff cancel ID`` — :meth:`cancel_quarantined` closes it without parsing);
* a marked row that parses again (repaired by hand, or written by a newer signoff during a
  rolling upgrade) is released by the next read by id.

Each process logs a quarantined row once (:class:`QuarantineLog`).
"""

from __future__ import annotations

import logging
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from signoff.model import ApprovalRequest, AuditEvent, RequestQuarantined

log = logging.getLogger("signoff.store")

MAX_REASON = 300


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A request row that could not be parsed (or carries a quarantine mark)."""

    id: str
    thread: str
    status: str
    reason: str
    marked: bool  # the row already carries the quarantine mark

    def error(self) -> RequestQuarantined:
        return RequestQuarantined(self.id, self.reason, status=self.status)

    def audit_event(self) -> AuditEvent:
        return AuditEvent(
            event="quarantined",
            request_id=self.id,
            thread=self.thread,
            actor="signoff",
            data={"reason": self.reason, "status": self.status},
        )


def describe(exc: BaseException) -> str:
    """A one-line reason without the row's content (no arguments, no secrets)."""
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
        if errors:
            first = errors[0]
            where = ".".join(str(part) for part in first["loc"])
            text = f"{first['msg']}" + (f" at {where}" if where else "")
            if len(errors) > 1:
                text += f" (and {len(errors) - 1} more problems)"
            return clean(text)
    return clean(f"{type(exc).__name__}: {exc}")


def clean(text: str) -> str:
    """Printable, one line, no markup brackets, at most :data:`MAX_REASON` characters."""
    out = []
    for ch in text:
        if ch in "[]":
            ch = "(" if ch == "[" else ")"
        elif unicodedata.category(ch)[0] == "C":
            ch = " "
        out.append(ch)
    flat = " ".join("".join(out).split())
    return flat if len(flat) <= MAX_REASON else flat[: MAX_REASON - 1] + "…"


def parse_doc(request_id: str, doc: object) -> ApprovalRequest | str:
    """The request in ``doc``, or why it cannot be read."""
    try:
        if not isinstance(doc, str | bytes):
            raise TypeError(f"the document is {type(doc).__name__}, not JSON text")
        request = ApprovalRequest.model_validate_json(doc)
    except Exception as exc:  # any failure to read one row is that row's problem only
        return describe(exc)
    if request.id != request_id:
        return clean(f"the document belongs to request {request.id}, not to this row")
    return request


def parse_row(
    request_id: str,
    doc: object,
    *,
    thread: str,
    status: str,
    marked_reason: str | None,
) -> ApprovalRequest | Unreadable:
    """Parse one row; a failure (or a mark on a row that still fails) is an :class:`Unreadable`.

    ``marked_reason`` is the row's ``quarantine_reason`` when it carries the mark (else None).
    A marked row that parses is returned as a request: the caller releases the mark.
    """
    parsed = parse_doc(request_id, doc)
    if isinstance(parsed, ApprovalRequest):
        return parsed
    marked = marked_reason is not None
    return Unreadable(request_id, thread, status, marked_reason or parsed, marked)


class QuarantineLog:
    """Log each quarantined row once per process (a scrape every second must not flood)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: set[str] = set()

    def found(self, bad: Unreadable, where: str) -> None:
        with self._lock:
            if bad.id in self._seen:
                return
            self._seen.add(bad.id)
        log.error(
            "request %s cannot be read and is quarantined (%s): %s; "
            "`signoff cancel %s` closes it, `signoff db check` lists every quarantined row",
            bad.id,
            where,
            bad.reason,
            bad.id,
            extra={"request_id": bad.id, "reason": bad.reason, "status": bad.status},
        )

    def released(self, request_id: str) -> None:
        with self._lock:
            self._seen.discard(request_id)
        log.warning(
            "quarantined request %s can be read again; released from quarantine",
            request_id,
            extra={"request_id": request_id},
        )


Read = ApprovalRequest | Unreadable


def to_request(row: Sequence[Any]) -> tuple[Read, bool]:
    """A row ``(id, thread, status, doc, quarantined_at, quarantine_reason, …)`` as (the
    request or why it cannot be read, whether the row carries the quarantine mark)."""
    request_id, thread, status, doc, quarantined_at, reason = row[:6]
    marked = quarantined_at is not None
    value = parse_row(
        request_id,
        doc,
        thread=thread,
        status=status,
        marked_reason=(reason or "unreadable") if marked else None,
    )
    return value, marked


def split(rows: Iterable[Sequence[Any]]) -> tuple[list[ApprovalRequest], list[Unreadable]]:
    """Rows (as for :func:`to_request`) into the readable requests and the unreadable rows."""
    good: list[ApprovalRequest] = []
    bad: list[Unreadable] = []
    for row in rows:
        value, _ = to_request(row)
        if isinstance(value, Unreadable):
            bad.append(value)
        else:
            good.append(value)
    return good, bad


def cancelled_event(
    request_id: str, thread: str, actor: str, reason: str | None, quarantine_reason: str | None
) -> AuditEvent:
    data: dict[str, Any] = {"quarantined": quarantine_reason or "unreadable"}
    if reason:
        data["reason"] = reason
    return AuditEvent(
        event="cancelled", request_id=request_id, thread=thread, actor=actor, data=data
    )
