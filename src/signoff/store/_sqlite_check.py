"""``signoff db check`` on a SQLite file: what :meth:`SQLiteStore.check` looks at, and why.

* **integrity** — ``PRAGMA integrity_check``: pages, indexes and constraints are sound.
* **schema** — ``PRAGMA user_version`` is the version this signoff writes.
* **audit triggers** — the triggers that make the audit table append-only are present (a
  dropped trigger lets anyone with the file rewrite the log; the hash chain would still show
  it in ``signoff audit verify``, but only after the fact).
* **quarantine** — request rows that cannot be read (see :mod:`._quarantine`): the marked
  ones, and pending rows that fail to parse now but nobody has read since (every pending
  row is parsed); unhealthy while one of them is still pending, since nobody can decide it.

It opens the file read-only (``mode=ro``): a check never creates, migrates or repairs.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from signoff.store import _sqlite_rows as rows
from signoff.store._quarantine import split
from signoff.store._sqlite_schema import AUDIT_TRIGGERS, SCHEMA_VERSION
from signoff.store.base import QuarantinedRequest, StoreCheck

QUARANTINE_VERSION = 3  # the schema version that added the quarantine columns
MAX_LISTED = 100


def check_file(path: str, url: str, busy_timeout_ms: int = 5000) -> StoreCheck:
    report = StoreCheck(store=url, backend="sqlite", version=0, supported=SCHEMA_VERSION)
    if not os.path.isfile(path):
        report.add("file", False, f"no database file at {path}")
        return report
    try:
        conn = sqlite3.connect(
            f"file:{quote(str(Path(path)))}?mode=ro", uri=True, timeout=busy_timeout_ms / 1000
        )
    except sqlite3.Error as exc:
        report.add("file", False, f"cannot open {path}: {exc}")
        return report
    try:
        for step in (_integrity, _schema, _triggers, _quarantine):
            try:
                step(conn, report)
            except sqlite3.Error as exc:
                report.add(_NAMES[step], False, f"could not check: {exc}")
    finally:
        conn.close()
    return report


def _integrity(conn: sqlite3.Connection, report: StoreCheck) -> None:
    problems = [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]
    ok = problems == ["ok"]
    detail = "ok" if ok else "; ".join(problems[:5]) + (" …" if len(problems) > 5 else "")
    if not ok:
        detail += " — restore the file from a backup"
    report.add("integrity", ok, detail)


def _schema(conn: sqlite3.Connection, report: StoreCheck) -> None:
    report.version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if report.version == SCHEMA_VERSION:
        report.add("schema", True, f"version {report.version}")
    elif report.version < SCHEMA_VERSION:
        report.add(
            "schema",
            False,
            f"version {report.version}, this signoff writes {SCHEMA_VERSION}: "
            "run `signoff db upgrade`",
        )
    else:
        report.add(
            "schema",
            False,
            f"version {report.version} is newer than this signoff ({SCHEMA_VERSION}): "
            "upgrade signoff",
        )


def _triggers(conn: sqlite3.Connection, report: StoreCheck) -> None:
    found = {
        name
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'audit'"
        )
    }
    missing = [name for name in AUDIT_TRIGGERS if name not in found]
    if report.version == 0:
        report.add("audit_triggers", False, "no signoff schema in this file")
    elif missing:
        report.add(
            "audit_triggers",
            False,
            f"missing {', '.join(missing)}: the audit log can be rewritten; opening the "
            "store recreates them (`signoff db upgrade`), then run `signoff audit verify`",
        )
    else:
        report.add("audit_triggers", True, ", ".join(AUDIT_TRIGGERS))


def _quarantine(conn: sqlite3.Connection, report: StoreCheck) -> None:
    if report.version < QUARANTINE_VERSION:
        report.add("quarantine", True, "not tracked before schema version 3")
        return
    report.add_quarantine(rows.quarantined(conn, MAX_LISTED) + _unmarked(conn))


def _unmarked(conn: sqlite3.Connection) -> list[QuarantinedRequest]:
    """Pending rows that became unreadable since anyone last read them: parsed here, page
    by page, and reported — not marked (a check only reads)."""
    found: list[QuarantinedRequest] = []
    after = ""
    while len(found) < MAX_LISTED:
        page = conn.execute(
            f"SELECT {rows.ROW} FROM requests WHERE status = 'pending' "
            "AND quarantined_at IS NULL AND id > ? ORDER BY id LIMIT 500",
            (after,),
        ).fetchall()
        if not page:
            break
        after = page[-1][0]
        found += [
            QuarantinedRequest(b.id, b.thread, b.status, None, b.reason) for b in split(page)[1]
        ]
    return found


_NAMES: dict[Callable[[sqlite3.Connection, StoreCheck], None], str] = {
    _integrity: "integrity",
    _schema: "schema",
    _triggers: "audit_triggers",
    _quarantine: "quarantine",
}
