"""``signoff db check`` on PostgreSQL: what :meth:`PostgresStore.check` looks at, and why.

* **schema** — the schema's version is the one this signoff writes.
* **audit triggers** — the triggers refusing UPDATE/DELETE and TRUNCATE on the audit table
  exist and are enabled (``ALTER TABLE … DISABLE TRIGGER`` would silently allow rewrites).
* **audit privileges** — no role (PUBLIC and the owner included) holds UPDATE, DELETE or
  TRUNCATE on the audit table (docs/deploy.md: the append-only log is enforced twice).
* **app roles** — every role granted the request tables (``signoff db upgrade --grant``)
  holds everything a replica needs (:data:`._pg_schema.APP_GRANTS`), so no replica fails
  half-way on a table it cannot write.
* **quarantine** — request rows that cannot be read (see :mod:`._quarantine`): the marked
  ones, and pending rows that fail to parse now but nobody has read since.

Read-only: catalog queries, and reads of the requests table (every pending row is parsed).
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from psycopg import AsyncConnection

from signoff.store._pg_schema import AUDIT_TRIGGERS, current_version
from signoff.store._pg_sql import ROW
from signoff.store._quarantine import split
from signoff.store.base import QuarantinedRequest, StoreCheck

Conn = AsyncConnection[tuple[Any, ...]]
QUARANTINE_VERSION = 3  # the schema version that added the quarantine columns
MAX_LISTED = 100

# What a replica's role needs (mirrors APP_GRANTS / SERVER_GRANTS in _pg_schema.py).
_APP_NEEDS = (
    ("schema_migrations", ("SELECT",)),
    ("store_secrets", ("SELECT",)),
    ("requests", ("SELECT", "INSERT", "UPDATE")),
    ("call_keys", ("SELECT", "INSERT", "UPDATE")),
    ("grants", ("SELECT", "INSERT", "UPDATE")),
    ("grants_version", ("SELECT", "INSERT", "UPDATE")),
    ("audit_head", ("SELECT", "INSERT", "UPDATE")),
    ("outbox", ("SELECT", "INSERT", "UPDATE")),
    ("audit", ("SELECT", "INSERT")),
)
_SERVER_NEEDS = (
    ("server_tokens", ("SELECT", "INSERT", "UPDATE", "DELETE")),
    ("server_sessions", ("SELECT", "INSERT", "UPDATE", "DELETE")),
    ("server_links", ("SELECT", "INSERT", "UPDATE", "DELETE")),
    ("server_meta", ("SELECT",)),
    ("server_token_changes", ("SELECT", "UPDATE")),
)

_TRIGGERS = """
SELECT t.tgname, t.tgenabled FROM pg_trigger t
JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relname = 'audit' AND NOT t.tgisinternal
"""

_AUDIT_MUTATORS = """
SELECT coalesce(r.rolname, 'PUBLIC'), a.privilege_type
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
CROSS JOIN LATERAL aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) a
LEFT JOIN pg_roles r ON r.oid = a.grantee
WHERE n.nspname = %s AND c.relname = 'audit'
  AND a.privilege_type IN ('UPDATE', 'DELETE', 'TRUNCATE')
ORDER BY 1, 2
"""

_APP_ROLES = """
SELECT DISTINCT r.rolname
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
CROSS JOIN LATERAL aclexplode(c.relacl) a
JOIN pg_roles r ON r.oid = a.grantee
WHERE n.nspname = %s AND c.relname = 'requests' AND a.grantee <> c.relowner
  AND a.privilege_type = 'INSERT'
ORDER BY 1
"""


async def check_schema(conn: Conn, schema: str, url: str, supported: int) -> StoreCheck:
    report = StoreCheck(store=url, backend="postgresql", version=0, supported=supported)
    report.version = await current_version(conn, schema)
    if report.version == 0:
        report.add("schema", False, f"no signoff schema {schema!r}: run `signoff db upgrade`")
        return report
    if report.version == supported:
        report.add("schema", True, f"version {report.version}")
    elif report.version < supported:
        report.add(
            "schema",
            False,
            f"version {report.version}, this signoff writes {supported}: run `signoff db upgrade`",
        )
    else:
        report.add(
            "schema",
            False,
            f"version {report.version} is newer than this signoff ({supported}): upgrade it",
        )
    await _triggers(conn, schema, report)
    await _audit_privileges(conn, schema, report)
    await _app_roles(conn, schema, report)
    await _quarantine(conn, schema, report)
    return report


async def _rows(conn: Conn, query: str, *params: Any) -> list[tuple[Any, ...]]:
    return await (await conn.execute(query, params)).fetchall()


async def _triggers(conn: Conn, schema: str, report: StoreCheck) -> None:
    found = dict(await _rows(conn, _TRIGGERS, schema))
    missing = [name for name in AUDIT_TRIGGERS if name not in found]
    disabled = [name for name in AUDIT_TRIGGERS if found.get(name) == "D"]
    problems = [f"missing {name}" for name in missing] + [f"{name} disabled" for name in disabled]
    if problems:
        report.add(
            "audit_triggers",
            False,
            f"{', '.join(problems)}: the audit log can be rewritten; run `signoff db upgrade` "
            "as the schema's owner (it restores them), then `signoff audit verify`",
        )
    else:
        report.add("audit_triggers", True, ", ".join(AUDIT_TRIGGERS))


async def _audit_privileges(conn: Conn, schema: str, report: StoreCheck) -> None:
    grants = await _rows(conn, _AUDIT_MUTATORS, schema)
    if grants:
        held = ", ".join(f"{role}: {privilege}" for role, privilege in grants)
        report.add(
            "audit_privileges",
            False,
            f"roles may change the audit log ({held}); "
            f'REVOKE UPDATE, DELETE, TRUNCATE ON "{schema}".audit FROM each',
        )
    else:
        report.add("audit_privileges", True, "no role holds UPDATE, DELETE or TRUNCATE on audit")


async def _app_roles(conn: Conn, schema: str, report: StoreCheck) -> None:
    roles = [role for (role,) in await _rows(conn, _APP_ROLES, schema)]
    if not roles:
        report.add("app_roles", True, "no role besides the owner is granted the request tables")
        return
    server = await _exists(conn, schema, "server_tokens")
    needs = _APP_NEEDS + (_SERVER_NEEDS if server else ())
    problems = []
    for role in roles:
        lacking = await _lacking(conn, schema, role, needs)
        if lacking:
            problems.append(f"{role} lacks {', '.join(lacking)}")
    if problems:
        report.add(
            "app_roles",
            False,
            f"{'; '.join(problems)}: run `signoff db upgrade --grant ROLE` as the owner",
        )
    else:
        report.add("app_roles", True, f"{', '.join(roles)}: every privilege a replica needs")


async def _lacking(
    conn: Conn, schema: str, role: str, needs: tuple[tuple[str, tuple[str, ...]], ...]
) -> list[str]:
    lacking = []
    usage = await _rows(conn, "SELECT has_schema_privilege(%s, %s, 'USAGE')", role, schema)
    if not usage[0][0]:
        lacking.append("USAGE on the schema")
    for table, privileges in needs:
        if not await _exists(conn, schema, table):
            continue  # an older schema: the schema check already says to upgrade
        qualified = f'"{schema}"."{table}"'
        for privilege in privileges:
            held = await _rows(
                conn, "SELECT has_table_privilege(%s, %s, %s)", role, qualified, privilege
            )
            if not held[0][0]:
                lacking.append(f"{privilege} on {table}")
    return lacking


async def _exists(conn: Conn, schema: str, table: str) -> bool:
    found = await _rows(
        conn, "SELECT to_regclass(format('%%I.%%I', %s::text, %s::text)) IS NOT NULL", schema, table
    )
    return bool(found[0][0])


async def _quarantine(conn: Conn, schema: str, report: StoreCheck) -> None:
    if report.version < QUARANTINE_VERSION:
        report.add("quarantine", True, "not tracked before schema version 3")
        return
    rows = await _rows(
        conn,
        f'SELECT id, thread, status, quarantined_at, quarantine_reason FROM "{schema}".requests '
        "WHERE quarantined_at IS NOT NULL ORDER BY quarantined_at DESC, id LIMIT %s",
        MAX_LISTED,
    )
    marked = [
        QuarantinedRequest(rid, thread, status, at.astimezone(UTC), why or "unreadable")
        for rid, thread, status, at, why in rows
    ]
    report.add_quarantine(marked + await _unmarked(conn, schema))


async def _unmarked(conn: Conn, schema: str) -> list[QuarantinedRequest]:
    """Pending rows that became unreadable since anyone last read them: parsed here, page
    by page, and reported — not marked (a check only reads)."""
    found: list[QuarantinedRequest] = []
    after = ""
    while len(found) < MAX_LISTED:
        page = await _rows(
            conn,
            f"SELECT {ROW} FROM \"{schema}\".requests WHERE status = 'pending' "
            "AND quarantined_at IS NULL AND id > %s ORDER BY id LIMIT 500",
            after,
        )
        if not page:
            break
        after = page[-1][0]
        found += [
            QuarantinedRequest(b.id, b.thread, b.status, None, b.reason) for b in split(page)[1]
        ]
    return found
