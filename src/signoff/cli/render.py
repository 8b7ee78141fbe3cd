"""How the CLI shows things to a person (rich tables and panels).

Agent and approver text is never parsed as Rich markup or emoji codes: every line that
carries it is built as a :class:`~rich.text.Text` from literal parts, and each part goes
through :func:`~signoff.model.text.inert` first, so escape sequences, bidi overrides and
invisible characters show as visible stand-ins and ``[brackets]`` show as typed.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from signoff.channels.redact import Redactor
from signoff.gate.settings import GateSettings
from signoff.model import ApprovalRequest, Inquiry, Question, chains, utcnow
from signoff.model.fallback import shown_actor
from signoff.model.text import ABSENT, changed_args, inert

if TYPE_CHECKING:
    from signoff.policy import Policy

STATUS_STYLE = {"pending": "yellow", "resolved": "green", "expired": "red", "cancelled": "dim"}
RESOLUTION_STYLE = {
    "approved": "green",
    "edited": "cyan",
    "rejected": "red",
    "responded": "blue",
    "expired": "red",
    "cancelled": "dim",
}


Part = str | tuple[str, str]


def line(*parts: Part) -> Text:
    """One line from literal parts, each made inert; ``(text, style)`` pairs are styled."""
    return Text.assemble(*(inert(p) if isinstance(p, str) else (inert(p[0]), p[1]) for p in parts))


def cell(value: object) -> Text:
    """A table cell: literal, inert text (a plain ``str`` cell would be parsed as markup)."""
    return Text(inert(str(value)))


def as_json(value: object) -> str:
    """Arguments as one line of JSON, non-ASCII text kept readable (``inert`` comes later)."""
    return json.dumps(value, ensure_ascii=False, default=str)


def ago(when: datetime | None) -> str:
    if when is None:
        return "-"
    seconds = (utcnow() - when).total_seconds()
    return f"{_span(abs(seconds))} ago" if seconds >= 0 else f"in {_span(-seconds)}"


def until(when: datetime) -> str:
    seconds = (when - utcnow()).total_seconds()
    return f"in {_span(seconds)}" if seconds >= 0 else f"{_span(-seconds)} ago"


def _span(seconds: float) -> str:
    if seconds < 60:
        return f"{int(seconds)}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m"
    if seconds < 86400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def pending_table(out: Console, reqs: list[ApprovalRequest]) -> None:
    if not reqs:
        out.print("no pending requests")
        return
    table = Table(box=None, header_style="bold")
    # The id is what people copy into `signoff approve`: never shorten it.
    table.add_column("id", no_wrap=True, min_width=max(len(r.id) for r in reqs))
    for col in ("tools", "requested by", "agent", "thread", "created", "deadline", "quorum"):
        table.add_column(col, overflow="fold")  # wrapped, never cut with "…"
    for r in reqs:
        quorum = ", ".join(
            chains.progress(cfg, c) or f"{len(c.approvals)}/{c.quorum}"
            for c, cfg in zip(r.calls, r.review_configs, strict=True)
            if c.resolution is None
        )
        table.add_row(
            *map(
                cell,
                (
                    r.id,
                    ", ".join(a.name for a in r.action_requests),
                    r.principal.id,
                    r.agent or "-",
                    r.thread,
                    ago(r.created_at),
                    until(r.expires_at),
                    quorum,
                ),
            )
        )
    out.print(table)


def request_detail(out: Console, r: ApprovalRequest, policy: Policy | None = None) -> None:
    """Everything about one request; the arguments shown are the ones that will run (after an
    edit: the edited ones, then what the edit changed), secrets masked as the policy's
    ``ui.redact_keys`` say (``--json`` shows them)."""
    redact = Redactor.from_policy(policy) if policy is not None else Redactor()
    out.print(
        line((r.id, "bold"), "  ", (r.status, STATUS_STYLE.get(r.status, "")), f"  ({r.kind})")
    )
    out.print(
        line(
            "  requested by ",
            r.principal.id,
            f" ({', '.join(r.principal.roles)})" if r.principal.roles else "",
            f" via agent {r.agent}" if r.agent else "",
            " on thread ",
            r.thread,
        )
    )
    out.print(
        line(
            f"  created {ago(r.created_at)}, deadline {until(r.expires_at)}",
            " (escalated)" if r.escalated else "",
        )
    )
    if r.user_request:
        out.print(line("  user asked: ", r.user_request))
    if r.reasoning:
        out.print(line("  agent's reasoning: ", r.reasoning))
    if r.inquiry:
        _inquiry(out, r.inquiry)
    for action, cfg, call in zip(r.action_requests, r.review_configs, r.calls, strict=True):
        out.print()
        res = call.resolution or "awaiting decision"
        rstyle = RESOLUTION_STYLE.get(call.resolution or "", "yellow")
        out.print(
            line(
                "  ",
                (action.name, "bold"),
                " ",
                (action.tool_call_id, "dim"),
                "  ",
                (res, rstyle),
                f" by {shown_actor(call.resolved_by)}" if call.resolved_by else "",
            )
        )
        if action.description:
            out.print(line("    ", action.description))
        out.print(
            line(
                f"    rule {action.rule}",
                f" — {action.reason}" if action.reason else "",
                f"; risk {action.risk}" if action.risk else "",
            )
        )
        if action.intent:
            judged = action.intent
            out.print(
                line(
                    f"    intent check by judge {judged.get('judge')} (model output): ",
                    (str(judged.get("verdict")), "bold"),
                    " — ",
                    str(judged.get("reason", "")),
                )
            )
        _args(out, action.args, call.action.args, redact)
        who = cfg.approvers
        group = (
            "anyone"
            if who.any
            else ", ".join([f"role {x}" for x in who.roles] + [f"user {x}" for x in who.users])
        )
        if who.chained:
            group = "chain (" + chains.describe(who) + ")"
            if call.resolution is None:
                out.print(line("    progress: ", (chains.progress(cfg, call), "bold")))
        out.print(
            line(
                f"    approvers: {group}; quorum {len(call.approvals)}/{call.quorum}",
                f" ({', '.join(call.approvals)})" if call.approvals else "",
                f"; may answer: {', '.join(cfg.allowed_decisions)}",
            )
        )
        if cfg.editable_args:
            editable = "*" if cfg.editable_args == "*" else ", ".join(cfg.editable_args)
            out.print(line(f"    editable: {editable}"))
        if call.message:
            out.print(line("    message: ", call.message))
        if call.answers is not None:
            out.print(line("    answers: ", as_json(call.answers)))
        if call.execution:
            note = _execution_note(call, policy) if call.execution == "executing" else ""
            out.print(
                line(
                    f"    execution: {call.execution}{note}",
                    f" ({call.execution_error})" if call.execution_error else "",
                )
            )
    if r.decisions:
        out.print()
        out.print("  decisions:")
        for d in r.decisions:
            out.print(
                line(
                    f"    {d.at.isoformat(timespec='seconds')} {d.approver} {d.type} "
                    f"{d.tool_call_id} via {d.channel}",
                    f" (os user {d.os_user})" if d.os_user else "",
                    f": {d.message}" if d.message else "",
                    " [for the whole thread]" if d.scope == "thread" else "",
                )
            )


def _args(
    out: Console, original: dict[str, object], runs: dict[str, object], redact: Redactor
) -> None:
    """The arguments that will run; after an edit, also what the edit changed."""
    changes = changed_args(original, runs)
    if not changes:
        out.print(line("    args: ", as_json(redact.value(runs))))
        return
    out.print(
        line("    ", ("args (edited — these run):", "cyan"), " ", as_json(redact.value(runs)))
    )
    for change in changes:
        out.print(
            line(
                f"      {change.name}: ",
                (_arg_value(redact, change.name, change.before), "red"),
                " → ",
                (_arg_value(redact, change.name, change.after), "green"),
            )
        )


def _arg_value(redact: Redactor, name: str, value: object) -> str:
    if value is ABSENT:
        return "(absent)"
    return as_json(redact.value({name: value})[name])


def _execution_note(call: Any, policy: Any) -> str:
    """A claim younger than ``gate.execution_timeout`` may still be running; an older one was
    interrupted and waits for ``signoff reconcile``."""
    timeout = GateSettings.from_policy(policy).execution_timeout if policy else 900.0
    started = call.execution_at
    if started is not None and utcnow() - started < timedelta(seconds=timeout):
        return f" — running since {started.strftime('%H:%M:%S')} UTC"
    return (
        " — interrupted: record how it ended with "
        f"`signoff reconcile <id> --call {call.tool_call_id} --outcome executed|failed`"
    )


def decision_summary(out: Console, r: ApprovalRequest, approver: str) -> None:
    for action, call in zip(r.action_requests, r.calls, strict=True):
        if call.resolution:
            out.print(
                line(
                    f"{action.name} {call.tool_call_id}: ",
                    (call.resolution, "bold"),
                    f" by {shown_actor(call.resolved_by)}" if call.resolved_by else "",
                )
            )
        else:
            cfg = r.config(call.tool_call_id)
            where = chains.progress(cfg, call) or f"quorum {len(call.approvals)}/{call.quorum}"
            out.print(
                line(f"{action.name} {call.tool_call_id}: {where} — waiting for more approvers")
            )
    out.print(line(f"request {r.id} is {r.status}"))
    for notice in r.reroute_notices():
        out.print(line((notice, "yellow")))
    granted = [d.grant_id for d in r.decisions if d.grant_id and d.approver == approver]
    for grant_id in dict.fromkeys(granted):
        out.print(line("also granted ", (grant_id, "bold"), " (`signoff grant list` shows it)"))


def explanation(out: Console, e: Any) -> None:
    data = e.to_dict()
    verdict = data.get("verdict", {})
    kind = verdict.get("kind") or verdict.get("verdict")
    style = {"allow": "green", "deny": "red", "require_approval": "yellow"}.get(kind, "")
    out.print(line((str(kind), f"bold {style}"), " by rule ", (str(verdict.get("rule")), "bold")))
    for key in ("reason", "description", "risk"):
        if verdict.get(key):
            out.print(line(f"  {key}: {verdict[key]}"))
    judged = verdict.get("intent")
    if judged:
        out.print(
            line(
                f"  intent check by judge {judged['judge']} (model output): ",
                (str(judged["verdict"]), "bold"),
                f" — {judged['reason']}",
            )
        )
    review = verdict.get("review")
    if review:
        chain = review.get("chain") or []
        for key, value in review.items():
            if key == "chain" or (chain and key == "approvers"):
                continue  # printed as the chain below
            if value not in (None, [], "", ()):
                out.print(line(f"  {key}: {value}"))
        if chain:
            out.print(line(f"  approval chain: {chain[0]}"))
            for step in chain[1:]:
                out.print(line(f"  {step}"))
    trace = data.get("trace") or []
    if trace:
        out.print("  evaluation:")
        for step in trace:
            out.print(line(f"    {step}" if isinstance(step, str) else f"    {as_json(step)}"))


def case_dict(r: Any) -> dict[str, Any]:
    return {
        "name": r.name,
        "passed": r.passed,
        "problems": list(r.problems),
        "verdict": r.got.kind,
        "rule": r.got.rule,
    }


def case_results(out: Console, results: list[Any]) -> None:
    for r in results:
        mark = ("✓", "green") if r.passed else ("✗", "red")
        out.print(line(mark, f" {r.name}  → {r.got.kind} ({r.got.rule})"))
        for problem in r.problems:
            out.print(line(f"    {problem}"))
    failed = sum(1 for r in results if not r.passed)
    out.print(f"{len(results) - failed} passed, {failed} failed")


def _inquiry(out: Console, inquiry: Inquiry) -> None:
    """The question, or each question of a form with its id (the key of ``--answers``)."""
    if not inquiry.is_form:
        out.print(line("  ", ("question:", "bold"), " ", inquiry.question))
        _question_details(out, inquiry.all_questions()[0], "  ")
        return
    out.print(line("  ", ("questions", "bold"), " (answer with --answers JSON keyed by id):"))
    for q in inquiry.all_questions():
        pick = " (pick any)" if q.multiple else ""
        out.print(line("    ", (q.id, "bold"), f"{pick}: ", q.question))
        _question_details(out, q, "      ")


def _question_details(out: Console, q: Question, indent: str) -> None:
    if q.choices:
        other = " (or another answer)" if q.allow_other else ""
        out.print(line(f"{indent}choices: ", ", ".join(q.choices), other))
    if q.default_answer:
        default = q.default_answer
        shown = ", ".join(default) if isinstance(default, list) else default
        out.print(line(f"{indent}suggested answer: ", shown))
