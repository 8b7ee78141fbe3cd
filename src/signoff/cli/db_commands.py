"""``signoff db upgrade``, ``signoff db status`` and ``signoff db check``: the store's schema
and health, for operators.

Every store also migrates itself when it opens (PostgreSQL under an advisory lock, so
replicas starting together do not race), so ``upgrade`` is for doing it *before* rolling out
replicas — e.g. as the database owner, when the replicas connect as a role that may not
create tables (docs/deploy.md).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from signoff.cli.main import ConfigOpt, JsonOpt, emit_json, fail, load_policy, out
from signoff.model import SignoffError
from signoff.store import SQLiteStore, Store, StoreCheck, open_store

db_app = typer.Typer(help="Create, upgrade and inspect the store's schema.", no_args_is_help=True)

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="Store URL (default: the config's `store:`), e.g. postgresql://owner@db/signoff",
        show_default=False,
    ),
]


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")


def _store(config: Path | None, url: str | None) -> Store:
    try:
        return open_store(url or load_policy(config).store_url)
    except SignoffError as exc:
        fail(str(exc), 2)


GrantOpt = Annotated[
    str | None,
    typer.Option(
        "--grant",
        help="PostgreSQL: also grant this role what replicas need (no UPDATE/DELETE on audit).",
        show_default=False,
    ),
]


@db_app.command("upgrade")
def upgrade(
    config: ConfigOpt = None,
    store: StoreOpt = None,
    grant: GrantOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create the schema, or bring it to this version of signoff, and restore the audit log's
    append-only triggers (safe to run any time)."""
    target = _store(config, store)
    if grant and type(target).__name__ != "PostgresStore":
        fail("--grant is for PostgreSQL stores", 2)
    try:
        report = asyncio.run(_upgrade(target, grant))
    except SignoffError as exc:
        fail(str(exc))
    if as_json:
        emit_json(report)
        return
    if report["applied"]:
        applied = ", ".join(str(v) for v in report["applied"])
        out.print(f"{report['store']}: migrated to version {report['version']} (applied {applied})")
    else:
        out.print(f"{report['store']}: schema is up to date (version {report['version']})")
    if report["audit_triggers_repaired"]:
        repaired = ", ".join(report["audit_triggers_repaired"])
        out.print(
            f"audit log: {repaired} — run `signoff audit verify` to see what changed while "
            "they were missing"
        )
    if grant:
        out.print(f"granted {grant} what a replica needs (audit: SELECT and INSERT only)")


@db_app.command("status")
def status(config: ConfigOpt = None, store: StoreOpt = None, as_json: JsonOpt = False) -> None:
    """Show the schema version and whether `signoff db upgrade` has work to do."""
    target = _store(config, store)
    try:
        current, supported = asyncio.run(_versions(target))
    except SignoffError as exc:
        fail(str(exc))
    report = {"store": _where(target), "version": current, "supported": supported}
    if as_json:
        emit_json(report)
    elif current < supported:
        out.print(f"{report['store']}: version {current}; run `signoff db upgrade` for {supported}")
    elif current > supported:
        out.print(f"{report['store']}: version {current} is newer than this signoff ({supported})")
    else:
        out.print(f"{report['store']}: schema is up to date (version {current})")


@db_app.command("check")
def check(config: ConfigOpt = None, store: StoreOpt = None, as_json: JsonOpt = False) -> None:
    """Check the store's health: exit 0 when healthy, 1 when not.

    SQLite: integrity, schema version, audit triggers, quarantined rows. PostgreSQL: schema
    version, audit triggers, audit privileges, the app roles' grants, quarantined rows.
    Read-only: it never migrates or repairs.
    """
    target = _store(config, store)
    try:
        report = asyncio.run(_check(target))
    except SignoffError as exc:
        fail(str(exc))
    report.store = _where(target)
    if as_json:
        emit_json(report.to_json())
    else:
        _print_check(report)
    raise typer.Exit(0 if report.ok else 1)


async def _check(store: Store) -> StoreCheck:
    try:
        return await store.check()
    finally:
        await store.close()


def _print_check(report: StoreCheck) -> None:
    out.print(f"{escape(report.store)} ({report.backend}, schema version {report.version})")
    width = max((len(item.name) for item in report.items), default=0)
    for item in report.items:
        mark = "[green]ok  [/]" if item.ok else "[bold red]FAIL[/]"
        out.print(f"  {mark}  {item.name.ljust(width)}  {escape(item.detail)}")
    for row in report.quarantined:
        since = (
            f"since {row.quarantined_at:%Y-%m-%d %H:%M:%S}Z"
            if row.quarantined_at
            else "not marked yet"
        )
        out.print(f"  quarantined {escape(row.id)} ({row.status}, {since}): {escape(row.reason)}")
    problems = sum(not item.ok for item in report.items)
    out.print("healthy" if not problems else f"[bold red]unhealthy[/]: {problems} problem(s)")


async def _upgrade(store: Store, role: str | None) -> dict[str, Any]:
    await store.open()
    try:
        current, _ = await _versions(store)
        applied = list(getattr(store, "migrations_applied", []))
        repaired = await _repair_audit_triggers(store)
        server_tables = await _server_tables(store)
        if role:
            await store.grant(role, server=server_tables)  # type: ignore[attr-defined]
    finally:
        await store.close()
    return {
        "store": _where(store),
        "version": current,
        "applied": applied,
        "server_tables": server_tables,
        "granted_to": role,
        "audit_triggers_repaired": repaired,
    }


async def _repair_audit_triggers(store: Store) -> list[str]:
    """SQLite recreated missing triggers when it opened; PostgreSQL needs the owner's hand."""
    repair = getattr(store, "repair_audit_triggers", None)
    if repair is not None:
        repaired: list[str] = await repair()
        return repaired
    return [f"recreated {name}" for name in getattr(store, "triggers_recreated", ())]


async def _server_tables(store: Store) -> bool:
    """Create the server's token/session/link tables too (PostgreSQL: replicas may run as a
    role that cannot); False without the signoff[server] extra."""
    if type(store).__name__ != "PostgresStore":
        return False  # SQLite: the server creates its tables in the file it opens anyway
    try:
        from signoff.server.db import server_db_for
    except ImportError:
        return False
    db = server_db_for(store)
    await db.open()
    await db.close()
    return True


async def _versions(store: Store) -> tuple[int, int]:
    from signoff.store._sqlite_schema import SCHEMA_VERSION

    schema_version = getattr(store, "schema_version", None)
    if schema_version is not None:
        result: tuple[int, int] = await schema_version()
        return result
    if isinstance(store, SQLiteStore):
        import sqlite3

        if not Path(store.path).exists():
            return 0, SCHEMA_VERSION
        with sqlite3.connect(store.path) as conn:
            return int(conn.execute("PRAGMA user_version").fetchone()[0]), SCHEMA_VERSION
    return 0, 0  # memory: nothing is kept


def _where(store: Store) -> str:
    """The store's URL without a password (``postgresql://u:***@host/db``)."""
    return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", store.url)
