"""How the CLI shows things to a person (rich tables and panels)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from signoff.model import ApprovalRequest, utcnow

STATUS_STYLE = {"pending": "yellow", "resolved": "green", "expired": "red", "cancelled": "dim"}
RESOLUTION_STYLE = {
    "approved": "green",
    "edited": "cyan",
    "rejected": "red",
    "responded": "blue",
    "expired": "red",
    "cancelled": "dim",
}


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
        table.add_column(col)
    for r in reqs:
        quorum = ", ".join(
            f"{len(c.approvals)}/{c.quorum}" for c in r.calls if c.resolution is None
        )
        table.add_row(
            r.id,
            ", ".join(a.name for a in r.action_requests),
            r.principal.id,
            r.agent or "-",
            r.thread,
            ago(r.created_at),
            until(r.expires_at),
            quorum,
        )
    out.print(table)


def request_detail(out: Console, r: ApprovalRequest) -> None:
    style = STATUS_STYLE.get(r.status, "")
    out.print(f"[bold]{r.id}[/]  [{style}]{r.status}[/]  ({r.kind})")
    out.print(
        f"  requested by {r.principal.id}"
        + (f" ({', '.join(r.principal.roles)})" if r.principal.roles else "")
        + (f" via agent {r.agent}" if r.agent else "")
        + f" on thread {r.thread}"
    )
    out.print(
        f"  created {ago(r.created_at)}, deadline {until(r.expires_at)}"
        + (" (escalated)" if r.escalated else "")
    )
    if r.user_request:
        out.print(f"  user asked: {r.user_request}")
    if r.reasoning:
        out.print(f"  agent's reasoning: {r.reasoning}")
    if r.inquiry:
        out.print(f"  [bold]question:[/] {r.inquiry.question}")
        if r.inquiry.choices:
            out.print(f"  choices: {', '.join(r.inquiry.choices)}")
        if r.inquiry.default_answer:
            out.print(f"  suggested answer: {r.inquiry.default_answer}")
    for action, cfg, call in zip(r.action_requests, r.review_configs, r.calls, strict=True):
        out.print()
        res = call.resolution or "awaiting decision"
        rstyle = RESOLUTION_STYLE.get(call.resolution or "", "yellow")
        out.print(
            f"  [bold]{action.name}[/] [dim]{action.tool_call_id}[/]  [{rstyle}]{res}[/]"
            + (f" by {call.resolved_by}" if call.resolved_by else "")
        )
        if action.description:
            out.print(f"    {action.description}")
        out.print(
            f"    rule {action.rule}"
            + (f" — {action.reason}" if action.reason else "")
            + (f"; risk {action.risk}" if action.risk else "")
        )
        out.print(f"    args: {json.dumps(action.args, default=str)}")
        if call.action.args != action.args:
            out.print(f"    [cyan]edited args:[/] {json.dumps(call.action.args, default=str)}")
        who = cfg.approvers
        group = (
            "anyone"
            if who.any
            else ", ".join([f"role {x}" for x in who.roles] + [f"user {x}" for x in who.users])
        )
        out.print(
            f"    approvers: {group}; quorum {len(call.approvals)}/{call.quorum}"
            + (f" ({', '.join(call.approvals)})" if call.approvals else "")
            + f"; may answer: {', '.join(cfg.allowed_decisions)}"
        )
        if cfg.editable_args:
            editable = "*" if cfg.editable_args == "*" else ", ".join(cfg.editable_args)
            out.print(f"    editable: {editable}")
        if call.message:
            out.print(f"    message: {call.message}")
        if call.execution:
            note = (
                " — interrupted: needs reconciliation by a human"
                if call.execution == "executing"
                else ""
            )
            out.print(
                f"    execution: {call.execution}{note}"
                + (f" ({call.execution_error})" if call.execution_error else "")
            )
    if r.decisions:
        out.print()
        out.print("  decisions:")
        for d in r.decisions:
            out.print(
                f"    {d.at.isoformat(timespec='seconds')} {d.approver} {d.type} "
                f"{d.tool_call_id} via {d.channel}"
                + (f": {d.message}" if d.message else "")
                + (" [for the whole thread]" if d.scope == "thread" else "")
            )


def decision_summary(out: Console, r: ApprovalRequest, approver: str) -> None:
    for action, call in zip(r.action_requests, r.calls, strict=True):
        if call.resolution:
            out.print(
                f"{action.name} {call.tool_call_id}: [bold]{call.resolution}[/]"
                + (f" by {call.resolved_by}" if call.resolved_by else "")
            )
        else:
            out.print(
                f"{action.name} {call.tool_call_id}: quorum "
                f"{len(call.approvals)}/{call.quorum} — waiting for more approvers"
            )
    out.print(f"request {r.id} is {r.status}")


def explanation(out: Console, e: Any) -> None:
    data = e.to_dict()
    verdict = data.get("verdict", {})
    kind = verdict.get("kind") or verdict.get("verdict")
    style = {"allow": "green", "deny": "red", "require_approval": "yellow"}.get(kind, "")
    out.print(f"[bold {style}]{kind}[/] by rule [bold]{verdict.get('rule')}[/]")
    for key in ("reason", "description", "risk"):
        if verdict.get(key):
            out.print(f"  {key}: {verdict[key]}")
    review = verdict.get("review")
    if review:
        for key, value in review.items():
            if value not in (None, [], "", ()):
                out.print(f"  {key}: {value}")
    trace = data.get("trace") or []
    if trace:
        out.print("  evaluation:")
        for step in trace:
            out.print(f"    {step}" if isinstance(step, str) else f"    {json.dumps(step)}")


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
        mark = "[green]✓[/]" if r.passed else "[red]✗[/]"
        out.print(f"{mark} {r.name}  → {r.got.kind} ({r.got.rule})")
        for p in r.problems:
            out.print(f"    {p}")
    failed = sum(1 for r in results if not r.passed)
    out.print(f"{len(results) - failed} passed, {failed} failed")
