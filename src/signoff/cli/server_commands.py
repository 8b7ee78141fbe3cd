"""``signoff serve``, ``signoff token create|revoke|list`` and ``signoff link``.

Registered by :mod:`signoff.cli.main` when this module exists. The server's dependencies
(``signoff[server]``) are imported inside the commands, so the rest of the CLI works
without them.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from signoff.cli.main import ConfigOpt, JsonOpt  # main imports us after defining them

if TYPE_CHECKING:
    from signoff.policy import Policy
    from signoff.server.records import ServerDB


token_app = typer.Typer(
    help="Bearer tokens for agents and approvers (shown once, stored hashed).",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.command("link")(link)
    app.add_typer(token_app, name="token")


def _cli() -> Any:
    """``signoff.cli.main`` (imported late: it imports this module while it loads)."""
    import importlib

    return importlib.import_module("signoff.cli.main")


def _server_imports() -> None:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        _cli().fail(f"the server needs the signoff[server] extra ({exc.name} is missing)", 2)


def _policy(config: Path | None) -> Policy:
    policy: Policy = _cli().load_policy(config)
    if policy.sections.get("remote"):
        _cli().fail(
            "this config has a `remote:` section: it is an agent's config, not a server's", 2
        )
    return policy


def serve(
    config: ConfigOpt = None,
    host: Annotated[
        str | None, typer.Option("--host", help="Interface (default serve.host).")
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Port (default serve.port, 8765).")
    ] = None,
) -> None:
    """Run the approval server: REST API, web inbox, one-click links, SSE, metrics."""
    _server_imports()
    from signoff.gate import Gate
    from signoff.model import PolicyError
    from signoff.server import ServerSettings, create_app
    from signoff.server.runner import serve as run

    cli = _cli()
    policy = _policy(config)
    problems, _ = cli.section_problems(policy)
    if problems:  # shown as `signoff policy check` shows them
        cli.print_problems(policy.path or config or Path("signoff.yaml"), problems)
    try:
        settings = ServerSettings.from_sections(policy.sections)
    except PolicyError as exc:
        cli.fail(f"invalid server settings:\n{exc}", 2)
    bind_host = host or settings.serve.host
    bind_port = settings.serve.port if port is None else port
    asyncio.run(_store_opens(policy))  # a broken store: one line now, not a traceback later
    gate = Gate(policy)
    app = create_app(gate, settings, owns_gate=True)
    public = settings.serve.public_url or f"http://{bind_host}:{bind_port}"
    cli.err.print(
        f"signoff serve: inbox at {public}/inbox, API at {public}/v1 "
        f"(store {_redacted_url(policy.store_url)})"
    )
    run(app, bind_host, bind_port, access_log=settings.serve.access_log)


async def _store_opens(policy: Policy) -> None:
    """Open and close the store once, so a broken one fails before the server starts."""
    from signoff.store import open_store

    store = open_store(policy.store_url)
    await store.open()
    await store.close()


def _db(policy: Policy) -> ServerDB:
    from signoff.server.db import server_db_for
    from signoff.store import MemoryStore, open_store

    store = open_store(policy.store_url)
    if not isinstance(store, MemoryStore):  # SQLite file or PostgreSQL database
        return server_db_for(store)
    _cli().fail(
        "tokens and links are kept beside a persistent store; "
        f"{_redacted_url(policy.store_url)} is not "
        "one (use store: sqlite:///signoff.db)",
        2,
    )
    raise AssertionError("unreachable")


def _run(policy: Policy, job: Any) -> Any:
    async def main() -> Any:
        db = _db(policy)
        await db.open()
        try:
            return await job(db)
        finally:
            await db.close()

    return asyncio.run(main())


@token_app.command("create")
def token_create(
    approver: Annotated[
        str | None, typer.Option("--approver", help="A person from people: (decides).")
    ] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="An agent name (submits and waits).")
    ] = None,
    trusted_roles: Annotated[
        bool,
        typer.Option(
            "--trusted-roles",
            help="Agent tokens only: use principal roles sent by the agent for principals "
            "not in people:.",
        ),
    ] = False,
    label: Annotated[str | None, typer.Option("--label", help="A note shown by `list`.")] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a token; it is shown once — only its hash is stored."""
    from signoff.server.tokens import create_token

    cli = _cli()
    if (approver is None) == (agent is None):
        cli.fail("give exactly one of --approver NAME or --agent NAME", 2)
    if trusted_roles and agent is None:
        cli.fail("--trusted-roles applies to --agent tokens only", 2)
    policy = _policy(config)
    kind: Literal["agent", "approver"] = "agent" if agent else "approver"
    subject = agent or approver or ""
    if kind == "approver" and policy.people and subject not in policy.people:
        cli.fail(
            f"{subject!r} is not in the people: directory; known: "
            + ", ".join(sorted(policy.people)),
            2,
        )
    raw, record = _run(
        policy,
        lambda db: create_token(db, kind, subject, trusted_roles=trusted_roles, label=label),
    )
    if as_json:
        cli.emit_json({"id": record.id, "token": raw, "kind": kind, "subject": subject})
        return
    cli.err.print(f"{kind} token {record.id} for [bold]{subject}[/] — shown once, store it now:")
    typer.echo(raw)
    hint = "SIGNOFF_TOKEN=… in the agent's environment" if kind == "agent" else "sign in at /login"
    cli.err.print(
        f"[dim]use: Authorization: Bearer <token> ({hint}); "
        f"revoke: signoff token revoke {record.id}[/]"
    )


@token_app.command("revoke")
def token_revoke(
    token: Annotated[str, typer.Argument(help="The token's id (tok_…) or the token itself.")],
    config: ConfigOpt = None,
) -> None:
    """Revoke a token at once; browser sessions signed in with it end too."""
    from signoff.server.tokens import revoke_token

    cli = _cli()
    policy = _policy(config)
    if not _run(policy, lambda db: revoke_token(db, token)):
        cli.fail(f"no active token {token!r} (see `signoff token list`)")
    cli.out.print(f"revoked {token if token.startswith('tok_') else 'the token'}")


@token_app.command("list")
def token_list(config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
    """List tokens (ids, owners, state — never the tokens themselves)."""
    from rich.table import Table

    cli = _cli()
    policy = _policy(config)
    tokens = _run(policy, lambda db: db.list_tokens())
    rows = [
        {
            "id": t.id,
            "kind": t.kind,
            "subject": t.subject,
            "trusted_roles": t.trusted_roles,
            "label": t.label,
            "created_at": _iso(t.created_at),
            "revoked_at": _iso(t.revoked_at) if t.revoked_at else None,
        }
        for t in tokens
    ]
    if as_json:
        cli.emit_json(rows)
        return
    table = Table("id", "kind", "for", "created", "state", "label")
    for r in rows:
        state = f"revoked {r['revoked_at']}" if r["revoked_at"] else "active"
        if r["trusted_roles"]:
            state += ", trusted roles"
        table.add_row(r["id"], r["kind"], r["subject"], r["created_at"], state, r["label"] or "")
    cli.out.print(table)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


@token_app.callback()
def _tokens() -> None:
    """Bearer tokens for agents and approvers."""


def link(
    approver: Annotated[
        str, typer.Option("--approver", help="Who the link signs in or decides as.")
    ],
    request: Annotated[
        str | None,
        typer.Option("--request", help="A request id: a decision link (else a sign-in link)."),
    ] = None,
    decision: Annotated[
        str, typer.Option("--decision", help="review (page with choices), approve or reject.")
    ] = "review",
    config: ConfigOpt = None,
) -> None:
    """Print a one-click link (single use; decision links expire at the request's deadline)."""
    from signoff.gate import Gate
    from signoff.server import ServerSettings
    from signoff.server.links import link_url, store_link

    cli = _cli()
    policy = _policy(config)
    if policy.people and approver not in policy.people:
        cli.fail(f"{approver!r} is not in the people: directory", 2)
    if decision not in ("review", "approve", "reject"):
        cli.fail("--decision is review, approve or reject", 2)
    settings = ServerSettings.from_sections(policy.sections)
    base = settings.serve.public_url or f"http://{settings.serve.host}:{settings.serve.port}"
    expires = time.time() + settings.auth.login_link_ttl
    purpose: Any = "login"
    if request is not None:
        with Gate(policy) as gate:
            req = cli.run_or_fail(gate, gate.get(request))
        expires, purpose = req.expires_at.timestamp(), decision
    raw = _run(policy, lambda db: store_link(db, purpose, approver, expires, request))
    typer.echo(link_url(base, purpose, raw, request))


__all__ = ["register"]


def _redacted_url(url: str) -> str:
    """The store URL without a password (it is printed and may end up in logs)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
