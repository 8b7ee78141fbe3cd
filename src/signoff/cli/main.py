"""``signoff …`` — the command line.

The CLI acts on the store directly, trusted like any local admin tool that can open the
database file; ``--as`` names the person deciding, checked against the policy like any
approver (not authenticated; the OS user is recorded beside it). With ``--server`` the
decision commands go through a server's API as an approver token's person instead
(:mod:`signoff.cli.deciding`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from signoff.assemble import check_sections
from signoff.checks.limits import Limits, check_json
from signoff.cli import deciding, errors, render
from signoff.cli.deciding import ServerOpt, TokenOpt
from signoff.gate import Gate
from signoff.gate.core import resolve_config_path
from signoff.gate.settings import env_non_interactive
from signoff.model import (
    AlreadyDecided,
    ApprovalRequest,
    CallContext,
    DecisionError,
    InvalidInput,
    NotFound,
    PolicyError,
    RequestQuarantined,
    SignoffError,
    ToolCall,
    Verdict,
    utcnow,
)
from signoff.policy import Policy
from signoff.policy.redact import mask_audit_data

app = typer.Typer(
    name="signoff",
    help="Human sign-off for AI-agent tool calls: policy, approvals, audit.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
policy_app = typer.Typer(help="Check, explain and test a policy file.", no_args_is_help=True)
audit_app = typer.Typer(help="Verify and export the audit log.", no_args_is_help=True)
app.add_typer(policy_app, name="policy")
app.add_typer(audit_app, name="audit")

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Policy file (default: $SIGNOFF_CONFIG or ./signoff.yaml)",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
AsOpt = Annotated[
    str | None,
    typer.Option(
        "--as",
        help="Local mode: the person deciding (checked by the policy, not authenticated).",
        show_default=False,
    ),
]
NonInteractiveOpt = Annotated[
    bool, typer.Option("--non-interactive", help="Nobody can answer: reject approvals at once.")
]


def fail(message: str, code: int = 1) -> NoReturn:
    """One line on stderr (and a JSON error on stdout under ``--json``), then exit."""
    errors.report(message, code)


def load_policy(config: Path | None) -> Policy:
    path = resolve_config_path(config)
    if not path.exists():
        fail(
            f"no policy file at {path}; pass --config or set $SIGNOFF_CONFIG "
            "(`signoff init` writes a starter file)",
            2,
        )
    try:
        return Policy.load(path)
    except PolicyError as exc:
        fail(f"invalid policy:\n{exc}", 2)
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}", 2)


def open_gate(
    config: Path | None, *, acting_as: str | None = None, interactive: bool = True
) -> Gate:
    policy = load_policy(config)
    if policy.sections.get("remote"):
        if acting_as is not None:
            fail(
                "this config points at a remote server: decisions use your approver token, "
                "so --as is not accepted",
                2,
            )
        fail("remote servers are not supported by this version of the CLI yet", 2)
    return deciding.CliGate(policy, interactive=interactive, os_user=deciding.local_os_user())


def emit_json(data: Any) -> None:
    out.print_json(json.dumps(data, default=str))


# ---------------------------------------------------------------------- policy
@policy_app.command("check")
def policy_check(config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
    """Validate the policy file: exit 0 with a summary, or 2 with every error."""
    path = resolve_config_path(config)
    try:
        policy = Policy.load(path)
    except PolicyError as exc:
        print_problems(path, [str(e) for e in getattr(exc, "errors", [exc])], as_json)
    except OSError as exc:
        fail(f"cannot read {path}: {exc}", 2)
    section_errors, section_warnings = section_problems(policy)
    warnings = [*policy.warnings, *section_warnings]
    if section_errors:
        print_problems(path, section_errors, as_json)
    summary = policy.summary()
    if as_json:
        emit_json({"ok": True, "summary": summary, "warnings": warnings, "hash": policy.hash})
        return
    out.print(f"[green]✓[/] {path} is valid (policy {policy.short_hash})")
    for key, value in summary.items():
        out.print(f"  {key}: {value}")
    for warning in warnings:
        out.print(f"  [yellow]warning:[/] {warning}")


def print_problems(path: Path, problems: list[str], as_json: bool = False) -> NoReturn:
    """A config's errors as `policy check` shows them (one bullet each), then exit 2."""
    from rich.markup import escape

    if as_json:
        emit_json({"ok": False, "errors": problems})
    else:
        err.print(f"[bold red]{escape(str(path))}: {len(problems)} error(s)[/]")
        for line in problems:
            err.print(f"  • {escape(line)}")
    raise typer.Exit(2)


def section_problems(policy: Policy) -> tuple[list[str], list[str]]:
    """Check the runtime sections other parts own (see :mod:`signoff.policy.sections`)."""
    return check_sections(policy)


@policy_app.command("explain")
def policy_explain(
    tool: Annotated[str, typer.Option("--tool", help="Tool name.")],
    args: Annotated[str, typer.Option("--args", help="Arguments as a JSON object.")] = "{}",
    principal: Annotated[str | None, typer.Option("--principal", help="Caller id.")] = None,
    roles: Annotated[str | None, typer.Option("--roles", help="Comma-separated roles.")] = None,
    context: Annotated[str | None, typer.Option("--context", help="Context as JSON.")] = None,
    grants: Annotated[
        bool, typer.Option("--grants", help="Also show the active grants that would apply.")
    ] = False,
    user_request: Annotated[
        str | None,
        typer.Option("--user-request", help="Shorthand for --context '{\"user_request\": TEXT}'."),
    ] = None,
    no_judge: Annotated[
        bool,
        typer.Option("--no-judge", help="Do not run the intent judge of a tool with intent:."),
    ] = False,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the verdict for one call and why: rule, approvers, quorum, deadline (and, with
    --grants, the standing grants that would decide it instead of a human). A tool with
    ``intent:`` asks its judge, as the gate would (--no-judge: the policy's own verdict)."""
    policy = load_policy(config)
    call_args = parse_json_object(args, "--args")
    ctx_fields = parse_json_object(context, "--context") if context else {}
    if user_request is not None:
        ctx_fields["user_request"] = user_request
    limits = Limits.from_sections(policy.sections)
    try:  # what the gate's first stage would refuse, refused here the same way
        check_json(call_args, limits, "--args")
        check_json(ctx_fields, limits, "--context")
    except InvalidInput as exc:
        fail(f"refused by limits: {exc}", 2)
    ctx = build_context(policy, principal, roles, ctx_fields)
    call = ToolCall(tool, call_args)
    explanation = policy.explain(call, ctx)
    if explanation.verdict is not None and explanation.verdict.judge_pending:
        explanation.verdict = _explained_intent(policy, call, ctx, explanation.verdict, no_judge)
    found: list[Any] = []
    if grants and explanation.verdict is not None:
        from signoff.cli.grant_commands import explain_grants, grant_json, print_explained_grants

        found, summary = explain_grants(config, call, ctx, explanation.verdict)
    if as_json:
        doc = explanation.to_dict()
        if grants:
            now = utcnow()
            doc["grants"] = [grant_json(g, now) for g in found]
        emit_json(doc)
        return
    render.explanation(out, explanation)
    if grants:
        print_explained_grants(found, summary)


def _explained_intent(
    policy: Policy, call: ToolCall, ctx: CallContext, verdict: Verdict, skip: bool
) -> Verdict:
    """The verdict after the intent judge (run here as the gate would; not audited)."""
    import asyncio
    from dataclasses import replace

    from signoff.judges.runner import IntentChecker
    from signoff.judges.settings import build_judges
    from signoff.model.judging import tighten
    from signoff.policy.redact import Redaction

    if skip:
        return replace(verdict, intent=None)
    assert verdict.intent is not None
    spec = verdict.intent
    try:
        judges = build_judges(policy.sections.get("judges"))
    except PolicyError as exc:
        fail(f"the judges: section cannot be used: {exc}", 2)
    checker = IntentChecker(judges, Redaction(policy.secret_keys))

    async def ask() -> Verdict:
        try:
            return tighten(verdict, await checker.judge(call, ctx, spec), call)
        finally:
            await checker.aclose()

    return asyncio.run(ask())


@policy_app.command("test")
def policy_test(
    cases: Annotated[Path, typer.Argument(help="YAML file of expected verdicts.")],
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a file of expected verdicts against the policy (policy-as-code tests)."""
    from signoff.policy import run_cases

    policy = load_policy(config)
    try:
        results = run_cases(policy, cases)
    except PolicyError as exc:
        fail(f"invalid cases file:\n{exc}", 2)
    failed = [r for r in results if not r.passed]
    if as_json:
        emit_json(
            {
                "passed": len(results) - len(failed),
                "failed": len(failed),
                "results": [render.case_dict(r) for r in results],
            }
        )
    else:
        render.case_results(out, results)
    raise typer.Exit(1 if failed else 0)


def parse_json_object(text: str | None, flag: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except RecursionError:
        fail(f"{flag} is nested too deeply", 2)
    except ValueError as exc:  # also integers over Python's 4300-digit limit
        why = "an integer has too many digits" if "digits" in str(exc) else str(exc)
        fail(f"{flag} is not valid JSON: {why}", 2)
    if not isinstance(value, dict):
        fail(f"{flag} must be a JSON object", 2)
    return value


def build_context(
    policy: Policy, principal: str | None, roles: str | None, fields: dict[str, Any]
) -> CallContext:
    from datetime import datetime

    role_list = [r.strip() for r in (roles or "").split(",") if r.strip()]
    who = policy.principal(principal or "anonymous", role_list)
    known = {k: fields.pop(k) for k in list(fields) if k in CallContext.FIELDS}
    if isinstance(known.get("time"), str):
        known["time"] = datetime.fromisoformat(known["time"])
    return CallContext(principal=who, attrs=fields, **known)


# ---------------------------------------------------------------------- requests
@app.command("pending")
def pending(
    thread: Annotated[str | None, typer.Option("--thread", help="Only this thread.")] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """List requests waiting for a decision."""
    if (srv := deciding.connect(config, server, token, acting_as=None)) is not None:
        return deciding.pending(srv, thread, as_json)
    with open_gate(config) as gate:
        reqs = gate._portal.run(gate.alist(status="pending", thread=thread))
    if as_json:
        emit_json([r.to_wire() for r in reqs])
        return
    render.pending_table(out, reqs)


@app.command("show")
def show(
    request_id: Annotated[str, typer.Argument(help="Request id (req_…).")],
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Show one request: calls, context, decisions, quorum, execution."""
    if (srv := deciding.connect(config, server, token, acting_as=None)) is not None:
        return deciding.show(srv, request_id, as_json)
    with open_gate(config) as gate:
        try:
            req = gate._portal.run(gate.get(request_id))
        except RequestQuarantined as exc:
            quarantined_exit(exc, as_json)
        except SignoffError as exc:
            fail(str(exc))
    if as_json:
        emit_json(req.to_wire())
        return
    render.request_detail(out, req, gate.policy)


def quarantined_exit(exc: RequestQuarantined, as_json: bool) -> NoReturn:
    """Explain a request whose stored row cannot be read (exit 1)."""
    if as_json:
        emit_json(
            {"id": exc.request_id, "quarantined": True, "status": exc.status, "reason": exc.reason}
        )
        raise typer.Exit(1)
    fail(str(exc))


def run_or_fail(gate: Gate, coro: Any) -> Any:
    try:
        return gate._portal.run(coro)
    except NotFound as exc:
        fail(str(exc))
    except AlreadyDecided as exc:
        fail(str(exc))
    except DecisionError as exc:
        fail(str(exc))
    except SignoffError as exc:
        fail(str(exc))


Decisions = list[dict[str, Any]]
Build = Callable[[ApprovalRequest], Decisions]


def _decide(
    config: Path | None,
    request_id: str,
    approver: str | None,
    build: Build,
    as_json: bool,
    server: str | None = None,
    token: str | None = None,
) -> None:
    """Open the store once: read the request, build the decisions from it, decide (or do the
    same through a server, as the approver token's person)."""
    if (srv := deciding.connect(config, server, token, acting_as=approver)) is not None:
        return deciding.decide(srv, request_id, build, as_json)
    approver = deciding.require_as(approver)
    with open_gate(config, acting_as=approver) as gate:
        req = run_or_fail(gate, gate.get(request_id))
        decisions = build(req)
        req = run_or_fail(
            gate, gate.adecide(request_id, decisions, approver=approver, channel="cli")
        )
    if as_json:
        emit_json(req.to_wire())
    else:
        render.decision_summary(out, req, approver)


def _each_call(call: str | None, decision: dict[str, Any]) -> Build:
    """``decision`` for ``--call``, or for every undecided call of the request."""

    def build(req: ApprovalRequest) -> Decisions:
        # With nothing left to decide, aim at every call so the answer says who decided.
        ids = [call] if call else req.pending_call_ids or [c.tool_call_id for c in req.calls]
        return [{"tool_call_id": c, **decision} for c in ids]

    return build


@app.command("approve")
def approve(
    request_id: Annotated[str, typer.Argument(help="Request id.")],
    approver: AsOpt = None,
    call: Annotated[str | None, typer.Option("--call", help="Only this call id.")] = None,
    message: Annotated[str | None, typer.Option("-m", "--message", help="Reason.")] = None,
    for_thread: Annotated[
        bool,
        typer.Option(
            "--for-thread",
            help="Also grant later calls of the same tool under the same rule, from the same "
            "agent for the same principal on this thread, until grants.default_ttl.",
        ),
    ] = False,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Approve a request (every undecided call, or one with --call)."""
    scope = "thread" if for_thread else "call"
    decision = {"type": "approve", "message": message, "scope": scope}
    _decide(config, request_id, approver, _each_call(call, decision), as_json, server, token)


@app.command("reject")
def reject(
    request_id: Annotated[str, typer.Argument(help="Request id.")],
    message: Annotated[str, typer.Option("-m", "--message", help="Why (shown to the model).")],
    approver: AsOpt = None,
    call: Annotated[str | None, typer.Option("--call", help="Only this call id.")] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Reject a request with a reason the agent will see."""
    decision = {"type": "reject", "message": message}
    _decide(config, request_id, approver, _each_call(call, decision), as_json, server, token)


@app.command("edit")
def edit(
    request_id: Annotated[str, typer.Argument(help="Request id.")],
    call: Annotated[str, typer.Option("--call", help="The call to edit.")],
    args: Annotated[str, typer.Option("--args", help="Changed arguments as JSON (merged).")],
    approver: AsOpt = None,
    message: Annotated[str | None, typer.Option("-m", "--message", help="Why.")] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Approve a call with edited arguments (only the policy's editable_args)."""
    changes = parse_json_object(args, "--args")

    def build(req: ApprovalRequest) -> Decisions:
        try:
            original = req.action_request(call)
        except KeyError:
            fail(
                f"no call {call!r} in request {request_id}; calls: "
                + ", ".join(a.tool_call_id for a in req.action_requests)
            )
        edited = {"name": original.name, "args": {**original.args, **changes}}
        return [{"tool_call_id": call, "type": "edit", "message": message, "edited_action": edited}]

    _decide(config, request_id, approver, build, as_json, server, token)


@app.command("respond")
def respond(
    request_id: Annotated[str, typer.Argument(help="Request id.")],
    approver: AsOpt = None,
    call: Annotated[str | None, typer.Option("--call", help="The call to answer.")] = None,
    message: Annotated[str, typer.Option("-m", "--message", help="The answer.")] = "",
    answers: Annotated[
        str | None,
        typer.Option(
            "--answers",
            help="An inquiry form's answers as JSON keyed by question id: "
            '\'{"region": "eu", "features": ["logs"]}\'.',
            show_default=False,
        ),
    ] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Answer instead of running the tool (or answer an inquiry: -m, or --answers for a form)."""
    decision: dict[str, Any] = {"type": "respond", "message": message or None}
    if answers is not None:
        decision["answers"] = parse_json_object(answers, "--answers")
    elif not message:
        decision["message"] = message  # refused by the gate, naming the field
    _decide(config, request_id, approver, _each_call(call, decision), as_json, server, token)


@app.command("reconcile")
def reconcile_cmd(
    request_id: Annotated[str, typer.Argument(help="Request id.")],
    call: Annotated[str, typer.Option("--call", help="The interrupted call's id.")],
    outcome: Annotated[str, typer.Option("--outcome", help="How it ended: executed or failed.")],
    approver: AsOpt,
    message: Annotated[str | None, typer.Option("-m", "--message", help="Why (audited).")] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Record how an interrupted execution ended (after gate.execution_timeout)."""
    if outcome not in ("executed", "failed"):
        fail("--outcome is executed or failed", 2)
    approver = deciding.require_as(approver)
    with open_gate(config, acting_as=approver) as gate:
        req = run_or_fail(
            gate,
            gate.areconcile(
                request_id,
                call,
                outcome="executed" if outcome == "executed" else "failed",
                actor=approver,
                message=message,
            ),
        )
    if as_json:
        emit_json(req.to_wire())
    else:
        out.print(render.line(f"{call}: {outcome} (reconciled by {approver})"))


@app.command("cancel")
def cancel_cmd(
    request_id: Annotated[str, typer.Argument(help="Request id.")],
    actor: Annotated[
        str | None, typer.Option("--as", help="Local mode: who cancels (audited; default cli).")
    ] = None,
    message: Annotated[str | None, typer.Option("-m", "--message", help="Why.")] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Cancel a pending request; the agent gets a cancellation."""
    if (srv := deciding.connect(config, server, token, acting_as=actor)) is not None:
        return deciding.cancel(srv, request_id, message, as_json)
    actor = actor or "cli"
    with open_gate(config) as gate:
        try:
            req = gate._portal.run(gate.acancel(request_id, actor=actor, reason=message))
        except RequestQuarantined:
            # The row cannot be read: close it by its status column alone (audited).
            closed = run_or_fail(
                gate, gate.store.cancel_quarantined(request_id, actor=actor, reason=message)
            )
            if as_json:
                emit_json({**closed.to_json(), "quarantined": True})
            elif closed.status == "cancelled":
                out.print(f"cancelled {closed.id} (quarantined: {closed.reason})")
            else:
                out.print(f"{closed.id} is already {closed.status} (quarantined: {closed.reason})")
            return
        except SignoffError as exc:
            fail(str(exc))
    if as_json:
        emit_json(req.to_wire())
    else:
        out.print(f"cancelled {req.id}")


# ---------------------------------------------------------------------- audit
# `audit verify` and `audit anchor` live in signoff/cli/audit_commands.py.
@audit_app.command("export")
def audit_export(
    fmt: Annotated[str, typer.Option("--format", help="jsonl or csv.")] = "jsonl",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="File (default stdout).")
    ] = None,
    request: Annotated[str | None, typer.Option("--request", help="Only this request.")] = None,
    config: ConfigOpt = None,
) -> None:
    """Export the audit log (every row, with its hashes). Secret-named arguments are masked
    (rows written since arguments are audited hold digests there, and verify as they are)."""
    from signoff.store.audit import to_csv, to_jsonl

    if fmt not in ("jsonl", "csv"):
        fail("--format must be jsonl or csv", 2)
    with open_gate(config) as gate:
        secrets = gate.policy.secret_keys
        records = [
            replace(r, data=mask_audit_data(r.data, secrets))
            for r in run_or_fail(gate, _read_all(gate, request))
        ]
    text = to_jsonl(records) if fmt == "jsonl" else to_csv(records)
    if output:
        output.write_text(text, encoding="utf-8")
        err.print(f"wrote {len(records)} rows to {output}")
    else:
        sys.stdout.write(text)


async def _read_all(gate: Gate, request_id: str | None) -> list[Any]:
    from signoff.store import AuditQuery

    await gate.astart()
    await gate.store.flush_audit()
    rows: list[Any] = []
    after = 0
    while True:
        batch = await gate.store.read_audit(
            AuditQuery(after_seq=after, limit=5000, request_id=request_id)
        )
        rows.extend(batch)
        if len(batch) < 5000:
            return rows
        after = batch[-1].seq


# ---------------------------------------------------------------------- demo / init
@app.command("demo")
def demo(
    non_interactive: Annotated[
        bool,
        typer.Option(
            "--auto", help="Answer the prompts with a script (used when stdin is not a terminal)."
        ),
    ] = False,
    workdir: Annotated[
        Path | None, typer.Option("--dir", help="Where to keep the demo store.")
    ] = None,
    terminal: Annotated[
        bool, typer.Option("--terminal", help="Decide in this terminal instead of the browser.")
    ] = False,
    port: Annotated[int, typer.Option("--port", help="Web mode: the server's port.")] = 8765,
    nobody: NonInteractiveOpt = False,
) -> None:
    """A scripted agent makes the seed scenarios' calls; you decide each one in the web inbox
    (or in this terminal with --terminal)."""
    auto = non_interactive or not sys.stdin.isatty()
    if nobody or env_non_interactive():
        # Nobody can answer: every call that needs approval is rejected at once, and the
        # agent sees "no human is available" — what a CI job or batch run gets.
        from signoff.cli.demo import run_demo

        raise typer.Exit(run_demo(out, auto=True, workdir=workdir, interactive=False))
    if not terminal:
        try:
            from signoff.cli.web_demo import run_web_demo
        except ImportError as exc:
            err.print(f"the web demo needs signoff[server] ({exc.name} is missing); terminal demo:")
        else:
            raise typer.Exit(run_web_demo(out, auto=auto, workdir=workdir, port=port))
    from signoff.cli.demo import run_demo

    raise typer.Exit(run_demo(out, auto=auto, workdir=workdir))


class Preset(StrEnum):
    """Policies ``signoff init --preset`` writes (files in ``signoff/cli/presets/``)."""

    deepagents = "deepagents"
    mcp_filesystem = "mcp-filesystem"
    shell = "shell"


def preset_text(preset: Preset | None) -> str:
    """The policy file ``signoff init`` writes: the starter file, or a preset."""
    from importlib.resources import files

    where = files("signoff.cli")
    source = (
        where / "starter.yaml" if preset is None else where / "presets" / f"{preset.value}.yaml"
    )
    return source.read_text(encoding="utf-8")


@app.command("init")
def init(
    path: Annotated[Path, typer.Argument(help="Where to write the policy.")] = Path("signoff.yaml"),
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    preset: Annotated[
        Preset | None,
        typer.Option(
            "--preset",
            help="A policy for deepagents' tools, @modelcontextprotocol/server-filesystem, or "
            "a shell tool, instead of the starter file.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Write a starter policy file (or a preset)."""
    if path.exists() and not force:
        fail(f"{path} exists; use --force to overwrite", 2)
    path.write_text(preset_text(preset), encoding="utf-8")
    out.print(f"wrote {path} — check it with `signoff policy check --config {path}`")


# Commands that live with their feature (server, MCP, …): each module has
# `register(app: typer.Typer) -> None` and imports its optional dependencies lazily.
COMMAND_MODULES = (
    "signoff.cli.server_commands",
    "signoff.cli.mcp_commands",
    "signoff.cli.langchain_commands",
    "signoff.cli.db_commands",
    "signoff.cli.audit_commands",
    "signoff.cli.grant_commands",
    "signoff.cli.channel_commands",
    "signoff.cli.watch_commands",
)


def _register_feature_commands() -> None:
    import importlib
    import importlib.util

    for name in COMMAND_MODULES:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name).register(app)


_register_feature_commands()
errors.guard_commands(app)  # after every registration: no command prints a traceback


def main() -> None:
    app()
