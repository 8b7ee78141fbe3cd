"""What every store does the same way with grants (standing approvals, :mod:`signoff.model.grants`).

A stored grant is its JSON document (the truth) plus columns for the indexes. Three things
change after it is written, and each store does them in one write transaction with their
audit events: it is *revoked* (``revoked_at``/``revoked_by``/``revoke_reason`` in the
document), its expiry is *noted* (a column only: one ``grant_expired`` event, once), and the
**grants version** — one counter row per store — goes up whenever a grant is created or
revoked, in the same transaction, so a gate in any process can poll one cheap read to know
its cache is stale.
"""

from __future__ import annotations

import logging
from datetime import datetime

from pydantic import ValidationError

from signoff.model import AuditEvent, IdempotencyConflict, StoreError
from signoff.model.grants import Grant

log = logging.getLogger("signoff.store")


def revoked(grant: Grant, *, by: str, reason: str | None, now: datetime) -> Grant:
    """``grant`` as revoked by ``by`` at ``now``."""
    return grant.model_copy(update={"revoked_at": now, "revoked_by": by, "revoke_reason": reason})


def expired_event(grant: Grant, now: datetime) -> AuditEvent:
    """The ``grant_expired`` event written when a store notes that ``grant`` has expired."""
    return AuditEvent(
        event="grant_expired",
        at=now,
        tool=grant.tool,
        rule=grant.rule,
        principal=grant.principal,
        agent=grant.agent,
        thread=grant.thread,
        actor=None,
        data={"grant_id": grant.id},
    )


def parse(doc: str | bytes, grant_id: str) -> Grant:
    """A stored document as a :class:`Grant`; :class:`StoreError` naming it if it is not one."""
    try:
        return Grant.model_validate_json(doc)
    except (ValidationError, ValueError) as exc:
        raise StoreError(f"grant {grant_id} cannot be read: {exc.__class__.__name__}") from exc


def readable(docs: list[tuple[str, str | bytes]]) -> list[Grant]:
    """The grants among ``(id, doc)`` rows that parse. An unreadable row is left out with a
    warning: it grants (or refuses) nothing, and one bad row never stops the others."""
    out = []
    for grant_id, doc in docs:
        try:
            out.append(parse(doc, grant_id))
        except StoreError as exc:
            log.warning("%s; it is left out", exc, extra={"grant_id": grant_id})
    return out


def same_or_conflict(stored: Grant, wanted: Grant) -> Grant:
    """Creating a grant whose id is stored: the stored one if it is the same grant (a retried
    create), else :class:`IdempotencyConflict`."""
    if stored == wanted:
        return stored
    raise IdempotencyConflict(
        f"grant id {wanted.id} is already used by another grant; use a new grant id"
    )


def duplicate(grant_id: str) -> StoreError:
    """A decision's new grant reuses a stored grant's id: the whole change is refused."""
    return StoreError(f"grant id {grant_id} is already stored; nothing was changed")
