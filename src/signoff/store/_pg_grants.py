"""Grants in PostgreSQL: statements and row conversion for
:class:`~signoff.store.postgres.PostgresStore`.

* **Written with what created them.** A decision's grants are inserted by the request's own
  conditional update (:data:`UPDATE_CTE`, a CTE over ``u``): they exist exactly when the
  decision committed. ``create`` is one statement too (grant, version bump, audit).
* **One version row for every replica.** ``grants_version`` is bumped by the statement that
  creates or revokes, so it commits with the change and every replica's next read of the row
  sees it — what a gate polls to reload its grant cache. A sequence would not do: ``nextval``
  is visible before the grant commits, and a gate reloading in between would miss it for good.
* **Audit only with the change.** ``audit_append`` is called in the select list over the
  changed rows (``FROM ins`` / ``FROM u``, one row at most), so it runs once per changed row
  and never when nothing changed — whatever join order the planner would pick for a
  ``LATERAL`` call (``json_to_recordset`` is estimated at 100 rows).
* **Expiry noted once.** ``note_expired`` locks due rows with ``FOR UPDATE SKIP LOCKED``, so
  the sweepers of several replicas never audit one expiry twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from psycopg import sql

from signoff.model.grants import Grant
from signoff.store.audit import iso_utc

COLUMNS = (
    "id, tool, rule, effect, scope, principal, agent, thread, created_at, expires_at, "
    "revoked_at, doc"
)
RECORD = (
    "x(id text, tool text, rule text, effect text, scope text, principal text, agent text, "
    "thread text, created_at timestamptz, expires_at timestamptz, revoked_at timestamptz, "
    "doc json)"
)
_X = ", ".join(f"x.{name.strip()}" for name in COLUMNS.split(","))
_BUMP = "UPDATE {s}.grants_version SET version = version + 1 WHERE id = 1"

#: The grants CTEs of the request update statement (:mod:`._pg_sql`): rows and the version
#: bump only when the request row was written (``FROM u``), and only if there are grants.
UPDATE_CTE = f"""g AS (
    INSERT INTO {{s}}.grants ({COLUMNS})
    SELECT {_X} FROM u, json_to_recordset(%(grants)s::json) AS {RECORD}
    RETURNING id),
gv AS (
    {_BUMP} AND EXISTS (SELECT 1 FROM g))"""

_CREATE = f"""
WITH ins AS (
    INSERT INTO {{s}}.grants ({COLUMNS})
    SELECT {_X} FROM json_to_recordset(%(grants)s::json) AS {RECORD}
    ON CONFLICT (id) DO NOTHING
    RETURNING id),
gv AS (
    {_BUMP} AND EXISTS (SELECT 1 FROM ins))
SELECT {{s}}.audit_append(%(audit)s::json, %(origin)s) FROM ins
"""

_REVOKE = f"""
WITH u AS (
    UPDATE {{s}}.grants SET revoked_at = %(revoked_at)s, doc = %(doc)s::json
    WHERE id = %(id)s AND revoked_at IS NULL
    RETURNING id),
gv AS (
    {_BUMP} AND EXISTS (SELECT 1 FROM u))
SELECT {{s}}.audit_append(%(audit)s::json, %(origin)s) FROM u
"""

_NOTE_EXPIRED = """
UPDATE {s}.grants g SET expired_noted = true
FROM (SELECT id FROM {s}.grants
      WHERE revoked_at IS NULL AND NOT expired_noted AND expires_at <= %s
      ORDER BY expires_at, id
      FOR UPDATE SKIP LOCKED) due
WHERE g.id = due.id
RETURNING g.id, g.doc::text, g.expires_at
"""


@dataclass(frozen=True, slots=True)
class GrantStatements:
    """Every grant statement, with the schema filled in once."""

    create: bytes
    revoke: bytes
    read: bytes
    active: bytes
    every: bytes
    version: bytes
    note_expired: bytes

    @classmethod
    def for_schema(cls, schema: str) -> GrantStatements:
        def q(text: str) -> bytes:
            # rendered once: psycopg would render a Composed again on every execute
            return sql.SQL(text).format(s=sql.Identifier(schema)).as_bytes(None)

        return cls(
            create=q(_CREATE),
            revoke=q(_REVOKE),
            read=q("SELECT doc::text FROM {s}.grants WHERE id = %s"),
            active=q(
                "SELECT id, doc::text FROM {s}.grants WHERE revoked_at IS NULL "
                "AND expires_at > %s ORDER BY created_at DESC, id DESC LIMIT %s"
            ),
            every=q(
                "SELECT id, doc::text FROM {s}.grants ORDER BY created_at DESC, id DESC LIMIT %s"
            ),
            version=q("SELECT version FROM {s}.grants_version WHERE id = 1"),
            note_expired=q(_NOTE_EXPIRED),
        )


def rows_json(grants: Iterable[Grant]) -> str:
    """Grants as the JSON array ``json_to_recordset`` reads (:data:`RECORD`)."""
    return json.dumps(
        [
            {
                "id": g.id,
                "tool": g.tool,
                "rule": g.rule,
                "effect": g.effect,
                "scope": g.scope,
                "principal": g.principal,
                "agent": g.agent,
                "thread": g.thread,
                "created_at": iso_utc(g.created_at),
                "expires_at": iso_utc(g.expires_at),
                "revoked_at": iso_utc(g.revoked_at) if g.revoked_at is not None else None,
                "doc": g.model_dump(mode="json"),
            }
            for g in grants
        ]
    )
