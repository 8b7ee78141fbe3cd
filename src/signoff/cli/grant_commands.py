"""``signoff grant add | list | revoke``: standing approvals (and refusals), and what
``signoff policy explain --grants`` shows about them.

Like the decision commands they act on the local store with ``--as NAME`` (not
authenticated), or through a server with ``--server URL`` and an approver token, which is then
the creator (:mod:`signoff.cli.deciding`). ``grant add`` prints the one sentence saying exactly
what the grant covers before it is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.table import Table

from signoff.cli import deciding, errors
from signoff.cli.deciding import ServerOpt, TokenOpt
from signoff.cli.main import (
    ConfigOpt,
    JsonOpt,
    emit_json,
    open_gate,
    out,
    parse_json_object,
)
from signoff.cli.render import cell, line
from signoff.gate.granting import new_grant
from signoff.model import (
    CallContext,
    DecisionError,
    NotAuthorized,
    NotFound,
    PolicyError,
    SignoffError,
    ToolCall,
    Verdict,
    utcnow,
)
from signoff.model.grants import Grant, GrantScope
from signoff.policy import Policy
from signoff.policy.durations import parse_duration
from signoff.policy.grant_rule import resolve_rule
from signoff.policy.grants import compile_grant_condition

T = TypeVar("T")

grant_app = typer.Typer(
    help="Standing approvals and refusals (grants): add, list, revoke.", no_args_is_help=True
)

#: Where a refused grant's field came from on the command line.
FLAGS = {
    "rule": "--rule",
    "when": "--when",
    "for": "--for",
    "scope.for": "--for",
    "thread": "--thread",
    "agent": "--agent",
    "principal": "--principal",
    "created_by": "--as",
    "by": "--as",
}


def register(app: typer.Typer) -> None:
    app.add_typer(grant_app, name="grant")


def grant_json(grant: Grant, now: datetime) -> dict[str, Any]:
    """A grant as ``--json`` and the API show it: its fields, whether it is active now, and
    the sentence saying what it covers."""
    return {
        **grant.model_dump(mode="json"),
        "active": grant.active(now),
        "description": grant.describe(),
    }


def _from_json(data: dict[str, Any]) -> Grant:
    return Grant.model_validate({k: v for k, v in data.items() if k in Grant.model_fields})


def _refused(exc: SignoffError) -> NoReturn:
    """A refusal as one line naming the flag: not allowed (1), bad input (2), unknown (1)."""
    if isinstance(exc, DecisionError):
        flag = FLAGS.get(exc.field or "", exc.field)
        text = f"{flag}: {exc.message}" if flag else exc.message
        if isinstance(exc, NotAuthorized):
            errors.report(text, 1, "not_authorized")
        errors.report(text, 2, "invalid_input")
    if isinstance(exc, NotFound):
        errors.report(str(exc), 1, "not_found")
    errors.report(str(exc), 1)


def _attempt(work: Callable[[], T]) -> T:
    try:
        return work()
    except (DecisionError, NotFound) as exc:
        _refused(exc)


# ---------------------------------------------------------------------- add
def scope_of(
    thread: str | None, agent: str | None, principal: str | None, every: bool
) -> GrantScope:
    """The scope the flags ask for (exit 2 for a combination that is none of them)."""
    if every:
        if thread or agent or principal:
            errors.report("--global covers every agent and principal: drop the other flags", 2)
        return "global"
    if thread:
        if not (agent and principal):
            errors.report(
                "a thread grant is for one agent and one principal on that thread: "
                "give --thread, --agent and --principal",
                2,
            )
        return "thread"
    if agent and principal:
        errors.report(
            "say which: --thread X --agent A --principal P (that thread), --agent A alone, "
            "or --principal P alone",
            2,
        )
    if agent:
        return "agent"
    if principal:
        return "principal"
    errors.report(
        "say what the grant covers: --thread X --agent A --principal P, --agent A, "
        "--principal P, or --global",
        2,
    )


@grant_app.command("add")
def grant_add(
    tool: Annotated[str, typer.Option("--tool", help="The tool the grant covers.")],
    effect: Annotated[
        str, typer.Option("--effect", help="allow (approve at once) or deny (reject at once).")
    ],
    acting_as: Annotated[
        str | None,
        typer.Option(
            "--as", help="Local mode: who grants (checked by the policy, not authenticated)."
        ),
    ] = None,
    thread: Annotated[str | None, typer.Option("--thread", help="Only on this thread.")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Only from this agent.")] = None,
    principal: Annotated[
        str | None, typer.Option("--principal", help="Only on behalf of this person.")
    ] = None,
    every: Annotated[
        bool, typer.Option("--global", help="Every agent, every principal (admins only).")
    ] = False,
    rule: Annotated[
        str | None,
        typer.Option(
            "--rule",
            help="The rule id it covers (default: the rule the policy sends such a call to).",
        ),
    ] = None,
    when: Annotated[
        str | None,
        typer.Option("--when", help="Conditions in the policy's when: syntax, as JSON."),
    ] = None,
    ttl: Annotated[
        str | None,
        typer.Option("--for", help="How long it lasts, like 8h (default grants.default_ttl)."),
    ] = None,
    reason: Annotated[str | None, typer.Option("-m", "--message", help="Why.")] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Create a grant: later calls of one tool under one rule, in one scope, are approved (or
    rejected) at once until it expires or is revoked."""
    if effect not in ("allow", "deny"):
        errors.report("--effect must be allow or deny", 2)
    scope = scope_of(thread, agent, principal, every)
    conditions = parse_json_object(when, "--when") if when is not None else None
    if ttl is not None:
        try:
            parse_duration(ttl)
        except PolicyError as exc:
            errors.report(f"--for: {exc.message}", 2)
    options: dict[str, Any] = {
        "tool": tool,
        "effect": effect,
        "scope": scope,
        "thread": thread,
        "agent": agent,
        "principal": principal,
        "when": conditions,
        "reason": reason,
    }
    if (srv := deciding.connect(config, server, token, acting_as=acting_as)) is not None:
        body = {**options, "rule": rule, "for": ttl}
        body = {k: v for k, v in body.items() if v is not None}
        made = _attempt(lambda: srv.call("POST", "/v1/grants", json=body))
        grant = _from_json(made)
        _show_created(grant, before=None, as_json=as_json, resolved=rule is None)
        return
    creator = deciding.require_as(acting_as)
    with open_gate(config, acting_as=creator) as gate:
        resolved = rule is None
        if rule is None:
            rule = _attempt(
                lambda: resolve_rule(
                    gate.policy, tool, conditions, principal=principal, agent=agent, thread=thread
                )
            )
        options.update(rule=rule, ttl=ttl, created_by=creator)
        # Checked and shown before it is stored: the sentence says what the grant covers.
        preview = _attempt(lambda: new_grant(gate, **options))
        if not as_json:
            _show_rule(preview, resolved)
            out.print(line(("grant: ", "bold"), preview.describe()))
        stored = _attempt(lambda: gate.grant(**options))
    _show_created(stored, before=preview, as_json=as_json)


def _show_rule(grant: Grant, resolved: bool) -> None:
    if resolved:
        out.print(line(f"rule {grant.rule}: the rule the policy sends such a call to"))


def _show_created(
    grant: Grant, *, before: Grant | None, as_json: bool, resolved: bool = False
) -> None:
    if as_json:
        emit_json(grant_json(grant, utcnow()))
        return
    if before is None:  # through a server: its answer is the grant it stored
        _show_rule(grant, resolved)
        out.print(line(("grant: ", "bold"), grant.describe()))
    elif grant.describe() != before.describe():  # the minute turned while storing it
        out.print(line(("stored: ", "bold"), grant.describe()))
    out.print(line(("created ", "green"), grant.id))


# ---------------------------------------------------------------------- list
@grant_app.command("list")
def grant_list(
    active: Annotated[
        bool, typer.Option("--active", help="Only grants neither revoked nor expired.")
    ] = False,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """List grants, newest first."""
    if (srv := deciding.connect(config, server, token, acting_as=None)) is not None:
        params = {"active": "true"} if active else {}
        page = _attempt(lambda: srv.call("GET", "/v1/grants", params=params, retry=True))
        grants = [_from_json(g) for g in page["grants"]]
    else:
        with open_gate(config) as gate:
            grants = _attempt(lambda: gate.list_grants(active=active))
    now = utcnow()
    if as_json:
        emit_json([grant_json(g, now) for g in grants])
        return
    grant_table(grants, now)


def state_of(grant: Grant, now: datetime) -> str:
    if grant.revoked_at is not None:
        return f"revoked by {grant.revoked_by}"
    return "active" if grant.active(now) else "expired"


def grant_table(grants: Sequence[Grant], now: datetime) -> None:
    if not grants:
        out.print("no grants")
        return
    table = Table(box=None, header_style="bold")
    table.add_column("id", no_wrap=True, min_width=max(len(g.id) for g in grants))
    for col in ("state", "by", "covers", "reason"):
        table.add_column(col, overflow="fold")
    for g in grants:
        table.add_row(
            *map(cell, (g.id, state_of(g, now), g.created_by, g.describe(), g.reason or ""))
        )
    out.print(table)


# ---------------------------------------------------------------------- revoke
@grant_app.command("revoke")
def grant_revoke(
    grant_id: Annotated[str, typer.Argument(help="Grant id (grant_…).")],
    acting_as: Annotated[
        str | None,
        typer.Option("--as", help="Local mode: who revokes (its creator or a grants admin)."),
    ] = None,
    reason: Annotated[str | None, typer.Option("-m", "--message", help="Why.")] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Revoke a grant at once (other processes stop applying it within a second)."""
    if (srv := deciding.connect(config, server, token, acting_as=acting_as)) is not None:
        body = {"reason": reason} if reason is not None else {}
        grant = _from_json(
            _attempt(lambda: srv.call("DELETE", f"/v1/grants/{grant_id}", json=body))
        )
    else:
        who = deciding.require_as(acting_as)
        with open_gate(config, acting_as=who) as gate:
            grant = _attempt(lambda: gate.revoke_grant(grant_id, by=who, reason=reason))
    if as_json:
        emit_json(grant_json(grant, utcnow()))
        return
    out.print(line(("revoked ", "yellow"), grant.id, ": ", grant.describe()))


# ---------------------------------------------------------------------- explain --grants
def applicable(
    policy: Policy, grants: Sequence[Grant], call: ToolCall, ctx: CallContext, verdict: Verdict
) -> list[Grant]:
    """The active grants that would decide ``call`` instead of a human, the one the gate uses
    first (deny grants before allow grants, then oldest first)."""
    if not verdict.needs_approval:
        return []
    one = verdict.review.approvers.needs_one if verdict.review is not None else True
    key = policy.person_key(ctx.principal.id)
    now = utcnow()
    found = []
    for grant in grants:
        if not grant.active(now) or not grant.covers(call, ctx, verdict.rule, key):
            continue
        if grant.effect == "allow" and not one:
            continue  # a grant never stands in for a quorum or a chain
        try:
            matches = compile_grant_condition(policy, grant.when)(call, ctx)
        except PolicyError:
            continue  # conditions this policy cannot read: the gate ignores the grant too
        if matches:
            found.append(grant)
    found.sort(key=lambda g: (g.effect != "deny", g.created_at))
    return found


def explain_grants(
    config: Path | None, call: ToolCall, ctx: CallContext, verdict: Verdict
) -> tuple[list[Grant], str]:
    """The grants that would apply to the explained call, and one line saying so."""
    with open_gate(config) as gate:
        grants = _attempt(lambda: gate.list_grants(active=True))
        found = applicable(gate.policy, grants, call, ctx, verdict)
    if not verdict.needs_approval:
        return [], f"grants apply only to calls that need approval; this one is {verdict.kind}"
    if not found:
        return [], f"no active grant applies ({len(grants)} active)"
    first = found[0]
    outcome = "approved" if first.effect == "allow" else "rejected"
    return found, f"{first.id} applies: the call would be {outcome} at once"


def print_explained_grants(found: Sequence[Grant], summary: str) -> None:
    out.print(line(("grants: ", "bold"), summary))
    for grant in found:
        out.print(line(f"  {grant.id} ({grant.created_by}): {grant.describe()}"))
