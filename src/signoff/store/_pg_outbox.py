"""The notification outbox in PostgreSQL: statements and row conversion for
:class:`~signoff.store.postgres.PostgresStore`.

* **Written with the request.** ``create_request`` inserts the request's first rows in the
  same statement as the request (a CTE over the request's own ``INSERT … RETURNING``), so
  they exist exactly when the request was created — an idempotent repeat writes none.
* **Claimed without a leader.** ``claim`` locks due rows with ``FOR UPDATE SKIP LOCKED``
  and marks them ``sending`` with a lease in one statement, so the delivery workers of any
  number of replicas take disjoint rows; a worker that dies mid-send leaves its rows to be
  claimed again once ``lease_until`` passes. Times are the caller's ``now`` (as in SQLite),
  so a worker's clock decides what is due; keep replicas on NTP.

Rows travel as one JSON array (``json_to_recordset``), so a batch is one statement.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg import sql

from signoff.store.base import OutboxItem

COLUMNS = (
    "id, request_id, channel, kind, recipient, person, data, status, attempts, created_at, "
    "next_at, lease_until, ref, error"
)


def _qualified(alias: str) -> str:
    return ", ".join(f"{alias}.{name.strip()}" for name in COLUMNS.split(","))


# The record type of one row in the JSON array (``json_to_recordset``).
RECORD = (
    "x(id text, request_id text, channel text, kind text, recipient text, person text, "
    "data jsonb, status text, attempts integer, created_at timestamptz, next_at timestamptz, "
    "lease_until timestamptz, ref jsonb, error text)"
)

#: The ``outbox`` CTE of the create statement (see :mod:`._pg_sql`): rows only when the
#: request was inserted (``FROM ins``), never on a repeat.
CREATE_CTE = f"""ob AS (
    INSERT INTO {{s}}.outbox ({COLUMNS})
    SELECT {_qualified("x")}
    FROM ins, json_to_recordset(%(outbox)s::json) AS {RECORD}
    ON CONFLICT (id) DO NOTHING)"""

# The same rows written by an update's statement, only when its conditional UPDATE matched.
UPDATE_CTE = f"""ob AS (
    INSERT INTO {{s}}.outbox ({COLUMNS})
    SELECT {_qualified("x")}
    FROM u, json_to_recordset(%(outbox)s::json) AS {RECORD}
    ON CONFLICT (id) DO NOTHING)"""

_INSERT = f"""
INSERT INTO {{s}}.outbox ({COLUMNS})
SELECT {COLUMNS} FROM json_to_recordset(%s::json) AS {RECORD}
ON CONFLICT (id) DO NOTHING
"""

_CHANNELS = "(%(channels)s::text[] IS NULL OR channel = ANY(%(channels)s::text[]))"

_CLAIM = f"""
WITH due AS MATERIALIZED (
    SELECT id FROM {{s}}.outbox
    WHERE ((status = 'pending' AND next_at <= %(now)s)
           OR (status = 'sending' AND lease_until <= %(now)s))
      AND {_CHANNELS}
    ORDER BY next_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED)
UPDATE {{s}}.outbox o
SET status = 'sending', attempts = o.attempts + 1, lease_until = %(lease)s
FROM due WHERE o.id = due.id
RETURNING {_qualified("o")}
"""

_NEXT_AT = f"""
SELECT least(
    (SELECT min(next_at) FROM {{s}}.outbox WHERE status = 'pending' AND {_CHANNELS}),
    (SELECT min(lease_until) FROM {{s}}.outbox WHERE status = 'sending' AND {_CHANNELS}))
"""


@dataclass(frozen=True, slots=True)
class OutboxStatements:
    """The outbox's statements, with the schema filled in once."""

    insert: bytes
    claim: bytes
    complete: bytes
    retry: bytes
    cancel_for: bytes
    for_request: bytes
    next_at: bytes

    @classmethod
    def for_schema(cls, schema: str) -> OutboxStatements:
        def q(text: str) -> bytes:
            # rendered once: psycopg would render a Composed again on every execute
            return sql.SQL(text).format(s=sql.Identifier(schema)).as_bytes(None)

        return cls(
            insert=q(_INSERT),
            claim=q(_CLAIM),
            complete=q(
                "UPDATE {s}.outbox SET status = %s, lease_until = NULL, ref = %s::jsonb, "
                "error = %s WHERE id = %s"
            ),
            retry=q(
                "UPDATE {s}.outbox SET status = 'pending', next_at = %s, lease_until = NULL, "
                "error = %s WHERE id = %s"
            ),
            cancel_for=q(
                "UPDATE {s}.outbox SET status = 'cancelled' "
                "WHERE request_id = %s AND status = 'pending' AND kind = ANY(%s::text[])"
            ),
            for_request=q(
                f"SELECT {COLUMNS} FROM {{s}}.outbox WHERE request_id = %s ORDER BY created_at, id"
            ),
            next_at=q(_NEXT_AT),
        )


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return (moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)).isoformat()


def rows_json(items: Sequence[OutboxItem]) -> str:
    """The items as the JSON array the statements read with ``json_to_recordset``."""
    return json.dumps(
        [
            {
                "id": i.id,
                "request_id": i.request_id,
                "channel": i.channel,
                "kind": i.kind,
                "recipient": i.recipient,
                "person": i.person,
                "data": i.data,
                "status": i.status,
                "attempts": i.attempts,
                "created_at": _iso(i.created_at),
                "next_at": _iso(i.next_at),
                "lease_until": _iso(i.lease_until),
                "ref": i.ref,
                "error": i.error,
            }
            for i in items
        ],
        sort_keys=True,
        default=str,
    )


def ref_json(ref: dict[str, Any] | None) -> str | None:
    return json.dumps(ref, sort_keys=True, default=str) if ref is not None else None


def claim_params(
    now: datetime, limit: int, lease_s: float, channels: Collection[str] | None
) -> dict[str, Any]:
    at = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    return {
        "now": at,
        "limit": limit,
        "lease": at + timedelta(seconds=lease_s),
        "channels": sorted(channels) if channels is not None else None,
    }


def channels_param(channels: Collection[str] | None) -> dict[str, Any]:
    return {"channels": sorted(channels) if channels is not None else None}


def _utc(moment: datetime | None) -> datetime | None:
    return moment.astimezone(UTC) if moment is not None else None


def to_item(row: tuple[Any, ...]) -> OutboxItem:
    (id_, request_id, channel, kind, recipient, person, data, status, attempts, created_at,
     next_at, lease_until, ref, error) = row  # fmt: skip
    return OutboxItem(
        id=id_,
        request_id=request_id,
        channel=channel,
        kind=kind,
        recipient=recipient,
        person=person,
        data=data if isinstance(data, dict) else json.loads(data),
        status=status,
        attempts=int(attempts),
        created_at=created_at.astimezone(UTC),
        next_at=next_at.astimezone(UTC),
        lease_until=_utc(lease_until),
        ref=ref if ref is None or isinstance(ref, dict) else json.loads(ref),
        error=error,
    )
