"""The PostgreSQL store's SQL, one statement per operation where the contract allows it.

* **create**: insert the request, its call keys and its first notification outbox rows
  (:mod:`._pg_outbox`), chain the audit events, NOTIFY — one statement, so one round trip
  and one commit (research §2.2: 0.49 ms against 0.78-0.85 ms for BEGIN/INSERT/INSERT/
  COMMIT). A duplicate call key aborts it; the caller then reads.
* **update**: the mutation is Python (the shared state machine), so it is a read, then one
  conditional statement ``UPDATE … WHERE id = $1 AND version = $2`` that also writes grants,
  the change's outbox rows and audit rows and NOTIFYs — all only when the version still
  matched (first decision wins; a loser re-reads and the state machine refuses it). When
  this process wrote the row last, the read is skipped (:mod:`._written`): one round trip.
  A valid document written clears a quarantine mark, as a read that parses it does.
* **claim due**: ``FOR UPDATE SKIP LOCKED`` plus a short lease in the row, so the sweepers of
  several replicas take disjoint requests without a leader, and a replica that dies holding
  a lease only delays those requests until it ends (database clock).

The NOTIFY payload is ``{"id", "event", "origin", "terminal", "seq"}``: never arguments.
``seq`` is the last audit row of the change, which lets a listener that reconnects catch up
from the log; ``terminal`` spares a replica reading a row whose change can wake nobody.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from psycopg import sql

from signoff.model import ApprovalRequest, AuditEvent, Transition
from signoff.store._pg_audit import entries_json
from signoff.store._pg_grants import UPDATE_CTE as GRANTS_CTE
from signoff.store._pg_grants import rows_json as grants_json
from signoff.store._pg_outbox import CREATE_CTE, rows_json
from signoff.store._pg_outbox import UPDATE_CTE as OUTBOX_UPDATE_CTE
from signoff.store._quarantine import Unreadable
from signoff.store._waiting import listener_event
from signoff.store.base import AuditQuery, OutboxItem

_CREATE = (
    """
WITH ins AS (
    INSERT INTO {s}.requests (id, kind, thread, status, created_at, due_at, version, doc)
    VALUES (%(id)s, %(kind)s, %(thread)s, %(status)s, %(created_at)s, %(due_at)s,
            %(version)s, %(doc)s::json)
    ON CONFLICT (id) DO NOTHING
    RETURNING id),
keys AS (
    INSERT INTO {s}.call_keys (thread, tool_call_id, request_id, fingerprint)
    SELECT %(thread)s, k.key, ins.id, k.value FROM ins, json_each_text(%(prints)s::json) k),
"""
    + CREATE_CTE
    + """
SELECT a.seq, pg_notify(%(channel)s, %(note)s::text || a.seq || '}}')
FROM ins, LATERAL (SELECT {s}.audit_append(%(audit)s::json, %(origin)s) AS seq) a
"""
)

_UPDATE = (
    """
WITH u AS (
    UPDATE {s}.requests
    SET status = %(status)s, due_at = %(due_at)s, version = %(version)s, doc = %(doc)s::json,
        claimed_by = NULL, claimed_until = NULL, quarantined_at = NULL, quarantine_reason = NULL
    WHERE id = %(id)s AND version = %(old_version)s
    RETURNING id),
"""
    + GRANTS_CTE
    + ",\n"
    + OUTBOX_UPDATE_CTE
    + """
SELECT a.seq, pg_notify(%(channel)s, %(note)s::text || a.seq || '}}')
FROM u, LATERAL (SELECT {s}.audit_append(%(audit)s::json, %(origin)s) AS seq) a
"""
)

# Every read of a request row takes these columns (then maybe more), so a row that cannot
# be parsed becomes an Unreadable — quarantined, never fatal (store/_quarantine.py).
ROW = "id, thread, status, doc::text, quarantined_at, quarantine_reason"


def _row(alias: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in ROW.split(","))


# The due rows come back with their documents: the store parses each before the sweeper
# sees it, and quarantines one that fails instead of handing the sweeper a poison row.
_CLAIM_DUE = f"""
WITH due AS (
    SELECT id FROM {{s}}.requests
    WHERE status = 'pending' AND quarantined_at IS NULL AND due_at <= %(now)s
      AND (claimed_until IS NULL OR claimed_until <= now() OR claimed_by = %(origin)s)
    ORDER BY due_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED)
UPDATE {{s}}.requests r
SET claimed_by = %(origin)s, claimed_until = now() + make_interval(secs => %(lease_s)s)
FROM due WHERE r.id = due.id
RETURNING {_row("r")}, r.due_at
"""

# Marks an unreadable row (once: whoever finds it first), cancels its notifications, audits
# and NOTIFYs (so waiters on other replicas are told) — one statement.
_QUARANTINE = """
WITH q AS (
    UPDATE {s}.requests
    SET quarantined_at = now(), quarantine_reason = %(reason)s,
        claimed_by = NULL, claimed_until = NULL
    WHERE id = %(id)s AND quarantined_at IS NULL
    RETURNING id),
o AS (
    UPDATE {s}.outbox SET status = 'cancelled', lease_until = NULL, error = %(error)s
    WHERE request_id IN (SELECT id FROM q) AND status IN ('pending', 'sending'))
SELECT a.seq, pg_notify(%(channel)s, %(note)s::text || a.seq || '}}')
FROM q, LATERAL (SELECT {s}.audit_append(%(audit)s::json, %(origin)s) AS seq) a
"""

# Closes a quarantined row without reading its document.
_CANCEL_QUARANTINED = """
WITH u AS (
    UPDATE {s}.requests
    SET status = 'cancelled', version = version + 1, claimed_by = NULL, claimed_until = NULL
    WHERE id = %(id)s AND status = 'pending' AND quarantined_at IS NOT NULL
    RETURNING id)
SELECT a.seq, pg_notify(%(channel)s, %(note)s::text || a.seq || '}}')
FROM u, LATERAL (SELECT {s}.audit_append(%(audit)s::json, %(origin)s) AS seq) a
"""

# /metrics: each count from a partial index, no document parsed.
_COUNT = """
SELECT
    (SELECT count(*) FROM {s}.requests WHERE status = 'pending' AND quarantined_at IS NULL),
    (SELECT count(*) FROM {s}.requests WHERE quarantined_at IS NOT NULL AND status = 'pending')
"""

# Rows leased by another replica are left out, so this replica's sweeper does not spin on
# requests it may not take; it still wakes every sweep interval to notice an expired lease.
_NEXT_DUE = """
SELECT due_at FROM {s}.requests
WHERE status = 'pending' AND quarantined_at IS NULL
  AND (claimed_until IS NULL OR claimed_until <= now() OR claimed_by = %(origin)s)
ORDER BY due_at
LIMIT 1
"""


@dataclass(frozen=True, slots=True)
class Statements:
    """Every statement, with the schema filled in once (as the bytes psycopg sends)."""

    create: bytes
    update: bytes
    claim_due: bytes
    next_due: bytes
    quarantine: bytes
    release: bytes
    cancel_quarantined: bytes
    quarantine_state: bytes
    quarantined: bytes
    count: bytes
    read_doc: bytes
    read_docs_terminal: bytes
    read_docs: bytes
    by_call: bytes
    stored_calls: bytes
    append_audit: bytes
    check_writable: bytes
    audit_chunk: bytes
    audit_top: bytes
    audit_last: bytes
    foreign_changes: bytes

    @classmethod
    def for_schema(cls, schema: str) -> Statements:
        def q(text: str) -> bytes:
            # rendered once: psycopg would render a Composed again on every execute
            return sql.SQL(text).format(s=sql.Identifier(schema)).as_bytes(None)

        return cls(
            create=q(_CREATE),
            update=q(_UPDATE),
            claim_due=q(_CLAIM_DUE),
            next_due=q(_NEXT_DUE),
            quarantine=q(_QUARANTINE),
            release=q(
                "UPDATE {s}.requests SET quarantined_at = NULL, quarantine_reason = NULL "
                "WHERE id = %s AND quarantined_at IS NOT NULL"
            ),
            cancel_quarantined=q(_CANCEL_QUARANTINED),
            quarantine_state=q(
                "SELECT thread, status, quarantined_at, quarantine_reason FROM {s}.requests "
                "WHERE id = %s"
            ),
            quarantined=q(
                "SELECT id, thread, status, quarantined_at, quarantine_reason FROM {s}.requests "
                "WHERE quarantined_at IS NOT NULL ORDER BY quarantined_at DESC, id LIMIT %s"
            ),
            count=q(_COUNT),
            read_doc=q(f"SELECT {ROW}, version FROM {{s}}.requests WHERE id = %s"),
            read_docs_terminal=q(
                f"SELECT {ROW} FROM {{s}}.requests WHERE id = ANY(%s) "
                "AND (status <> 'pending' OR quarantined_at IS NOT NULL)"
            ),
            read_docs=q(f"SELECT {ROW} FROM {{s}}.requests WHERE id = ANY(%s)"),
            by_call=q(
                f"SELECT {_row('r')} FROM {{s}}.call_keys k JOIN {{s}}.requests r "
                "ON r.id = k.request_id WHERE k.thread = %s AND k.tool_call_id = %s"
            ),
            stored_calls=q(
                "SELECT tool_call_id, request_id, fingerprint FROM {s}.call_keys "
                "WHERE thread = %s AND tool_call_id = ANY(%s)"
            ),
            append_audit=q("SELECT {s}.audit_append(%s::json, %s)"),
            check_writable=q("LOCK TABLE {s}.requests IN ROW EXCLUSIVE MODE"),
            audit_chunk=q(
                f"SELECT {AUDIT_SELECT} FROM {{s}}.audit WHERE seq > %s ORDER BY seq LIMIT %s"
            ),
            audit_top=q("SELECT seq FROM {s}.audit_head WHERE id = 1"),
            # the last row itself, not audit_head: a checkpoint signs what is in the table
            audit_last=q("SELECT seq, hash FROM {s}.audit ORDER BY seq DESC LIMIT 1"),
            foreign_changes=q(
                "SELECT request_id, event FROM {s}.audit WHERE seq > %s AND seq <= %s "
                "AND request_id IS NOT NULL AND origin IS DISTINCT FROM %s ORDER BY seq"
            ),
        )


AUDIT_SELECT = (
    "seq, event, at, request_id, thread, tool, tool_call_id, actor, principal, agent, rule, "
    "policy_hash, data::text, prev_hash, hash"
)
COUNT_BY = {"principal": "principal", "agent": "agent", "thread": "thread"}


def list_requests(
    schema: str, *, status: str | None, thread: str | None, kind: str | None
) -> tuple[sql.Composed, list[str]]:
    """Rows newest first, filtered, quarantined ones left out; LIMIT and OFFSET are the last
    two parameters."""
    where: list[sql.Composable] = [sql.SQL("quarantined_at IS NULL")]
    args: list[str] = []
    for column, value in (("status", status), ("thread", thread), ("kind", kind)):
        if value is not None:
            where.append(sql.SQL("{} = %s").format(sql.Identifier(column)))
            args.append(value)
    clause = sql.SQL("WHERE ") + sql.SQL(" AND ").join(where)
    query = sql.SQL(
        "SELECT {row} FROM {s}.requests {where} "
        "ORDER BY created_at DESC, id DESC LIMIT %s OFFSET %s"
    ).format(row=sql.SQL(ROW), s=sql.Identifier(schema), where=clause)
    return query, args


def select_audit(schema: str, query: AuditQuery) -> tuple[sql.Composed, list[Any]]:
    where: list[sql.Composable] = [sql.SQL("seq > %s")]
    args: list[Any] = [query.after_seq]
    for column in ("request_id", "thread", "tool", "event", "actor"):
        value = getattr(query, column)
        if value is not None:
            where.append(sql.SQL("{} = %s").format(sql.Identifier(column)))
            args.append(value)
    if query.since is not None:
        where.append(sql.SQL("at >= %s"))
        args.append(aware(query.since))
    if query.until is not None:
        where.append(sql.SQL("at < %s"))
        args.append(aware(query.until))
    args.append(query.limit)
    statement = sql.SQL("SELECT {cols} FROM {s}.audit WHERE {where} ORDER BY seq LIMIT %s").format(
        cols=sql.SQL(AUDIT_SELECT), s=sql.Identifier(schema), where=sql.SQL(" AND ").join(where)
    )
    return statement, args


def count_audit(
    schema: str, event: str, tool: str, since: datetime, by: str | None, value: str | None
) -> tuple[sql.Composed, list[Any]]:
    text = "SELECT count(*) FROM {s}.audit WHERE tool = %s AND event = %s AND at >= %s"
    args: list[Any] = [tool, event, aware(since)]
    if by is not None:
        column = COUNT_BY.get(by)
        if column is None:
            raise ValueError(f"count_events by must be one of {', '.join(COUNT_BY)}, not {by!r}")
        text += f" AND {column} IS NOT DISTINCT FROM %s"
        args.append(value)
    return sql.SQL(text).format(s=sql.Identifier(schema)), args


def aware(moment: datetime) -> datetime:
    """Naive datetimes are UTC in signoff (as in :func:`signoff.store.audit.iso_utc`)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def create_params(
    request: ApprovalRequest,
    events: list[AuditEvent],
    prints: dict[str, str],
    origin: str,
    channel: str,
    outbox: Sequence[OutboxItem] = (),
) -> dict[str, Any]:
    return {
        "id": request.id,
        "kind": request.kind,
        "thread": request.thread,
        "status": request.status,
        "created_at": aware(request.created_at),
        "due_at": aware(request.sweep_at),
        "version": request.version,
        "doc": request.model_dump_json(),
        "prints": json.dumps(prints),
        "outbox": rows_json(outbox),
        "audit": entries_json(events),
        "origin": origin,
        "channel": channel,
        "note": note_head(request, events, origin),
    }


def update_params(
    transition: Transition, old_version: int, origin: str, channel: str
) -> dict[str, Any]:
    new = transition.request
    return {
        "id": new.id,
        "old_version": old_version,
        "status": new.status,
        "due_at": aware(new.sweep_at),
        "version": new.version,
        "doc": new.model_dump_json(),
        "grants": grants_json(transition.grants),
        "outbox": rows_json(transition.outbox),
        "audit": entries_json(transition.events),
        "origin": origin,
        "channel": channel,
        "note": note_head(new, transition.events, origin),
    }


def note_head(request: ApprovalRequest, events: list[AuditEvent], origin: str) -> str:
    """The NOTIFY payload up to its ``seq``, which only the database knows: id, event and
    whether the request is now terminal (so a replica reads the row only when that can wake
    someone), never arguments (a payload must stay under 8000 bytes and may be seen by any
    listener)."""
    event = listener_event([e.event for e in events], request)
    head = json.dumps(
        {"id": request.id, "event": event, "origin": origin, "terminal": request.terminal}
    )
    return head[:-1] + ', "seq": '


def quarantine_params(bad: Unreadable, origin: str, channel: str) -> dict[str, Any]:
    head = json.dumps({"id": bad.id, "event": "quarantined", "origin": origin})
    return {
        "id": bad.id,
        "reason": bad.reason,
        "error": "request quarantined: it cannot be read",
        "audit": entries_json([bad.audit_event()]),
        "origin": origin,
        "channel": channel,
        "note": head[:-1] + ', "seq": ',
    }


def cancel_quarantined_params(
    request_id: str, event: AuditEvent, origin: str, channel: str
) -> dict[str, Any]:
    head = json.dumps({"id": request_id, "event": "cancelled", "origin": origin})
    return {
        "id": request_id,
        "audit": entries_json([event]),
        "origin": origin,
        "channel": channel,
        "note": head[:-1] + ', "seq": ',
    }
