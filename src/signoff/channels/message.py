"""The words every channel puts in its messages, written once.

Each provider module turns these into its own format (Block Kit, an embed, an Adaptive
Card, a LINE template, a plain-text + HTML email). Arguments pass through the
:class:`~signoff.channels.redact.Redactor`; the full view stays on the web page.

Every string here that an agent or an approver wrote is made inert
(:func:`~signoff.model.text.inert`: control, bidi and invisible characters shown, line
breaks as ``⏎``), so each provider module only escapes its own markup. The calls shown are
the ones that will run: after an edit, the edited arguments and what the edit changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from signoff.channels.redact import Redactor, cut
from signoff.model import ApprovalRequest, chains, utcnow
from signoff.model.fallback import shown_actor
from signoff.model.text import inert

PREFIX = {"reminder": "Reminder: ", "escalation": "Escalated: "}
MARK = {"approved": "✅", "edited": "✏️", "rejected": "❌", "responded": "💬", "expired": "⌛"}


@dataclass(frozen=True, slots=True)
class Choices:
    """The one-click answers a message may offer for a request."""

    approve: bool
    reject: bool
    answers: tuple[str, ...]  # an inquiry's choices (respond decisions)


def choices(req: ApprovalRequest, limit: int = 4) -> Choices:
    """What buttons fit: approve/reject if some pending call allows them, and an inquiry's
    choices (free text goes through the web page). Edits always go through the web page."""
    pending = [cfg for cfg, call in zip(req.review_configs, req.calls, strict=True)
               if call.resolution is None]  # fmt: skip
    allowed = {d for cfg in pending for d in cfg.allowed_decisions}
    answers: tuple[str, ...] = ()
    if req.inquiry is not None and "respond" in allowed and req.inquiry.choices:
        answers = tuple(inert(c) for c in req.inquiry.choices[:limit])
    return Choices(
        approve=req.kind != "inquiry" and "approve" in allowed,
        reject="reject" in allowed,
        answers=answers,
    )


def title(req: ApprovalRequest, kind: str = "prompt") -> str:
    """A one-line headline without arguments (safe for a subject line or a lock screen)."""
    prefix = PREFIX.get(kind, "")
    if req.kind == "inquiry":
        return f"{prefix}Question from {inert(req.agent or 'an agent')}"
    names = list(dict.fromkeys(inert(a.name) for a in req.action_requests))
    if len(req.action_requests) == 1:
        return f"{prefix}Approval needed: {names[0]}"
    return f"{prefix}Approval needed: {len(req.action_requests)} calls ({', '.join(names)})"


def question(req: ApprovalRequest) -> str | None:
    """The question; for a form, its title and each question's id and text (the form itself
    is answered on the web page or with ``signoff respond --answers``)."""
    inquiry = req.inquiry
    if inquiry is None:
        return None
    if not inquiry.is_form:
        return inert(inquiry.question)
    parts = [f"{inert(q.id)}: {cut(inert(q.question), 200)}" for q in inquiry.all_questions()]
    return f"{cut(inert(inquiry.question), 300)} — {len(parts)} questions: " + "; ".join(parts)


def call_lines(req: ApprovalRequest, redact: Redactor, limit: int = 300) -> list[str]:
    """One line per call: ``name(args…)`` as it will run, redacted and cut; after an edit,
    what the edit changed; then its description (of the original call: left out after an
    edit) or reason."""
    if req.kind == "inquiry":
        return []
    lines = []
    for action, cfg, call in zip(req.action_requests, req.review_configs, req.calls, strict=True):
        line = redact.call(action.name, call.action.args, limit)
        changes = redact.changes(action.args, call.action.args, 200)
        if changes:
            line += f" — edited: {changes}"
        why = action.reason if changes else action.description or action.reason
        if why:
            line += f" — {cut(inert(why), 200)}"
        if cfg.approvers.chained and call.resolution is None:
            line += f" — {chains.progress(cfg, call)}"  # e.g. stage 2 of 2: 0 of 2 finance …
        lines.append(line)
    return lines


def context_line(req: ApprovalRequest, now: datetime | None = None) -> str:
    """Who asks, for whom, on which thread, and until when."""
    parts = []
    if req.agent:
        parts.append(f"agent {inert(req.agent)}")
    parts.append(f"for {inert(req.principal.id)}")
    parts.append(f"thread {inert(req.thread)}")
    parts.append(f"expires {expires_in(req, now)}")
    return " · ".join(parts)


def expires_in(req: ApprovalRequest, now: datetime | None = None) -> str:
    seconds = (req.expires_at - (now or utcnow())).total_seconds()
    at = req.expires_at.strftime("%H:%M UTC")
    if seconds <= 0:
        return f"at {at} (passed)"
    if seconds < 90:
        return f"at {at} (in {int(seconds)} s)"
    if seconds < 5400:
        return f"at {at} (in {round(seconds / 60)} min)"
    return f"at {at} (in {round(seconds / 3600, 1):g} h)"


def outcome(req: ApprovalRequest) -> str:
    """What became of the request, for the message that replaces the prompt."""
    if req.status == "pending":
        return "Waiting for a decision"
    if req.status == "cancelled":
        who = next((c.resolved_by for c in req.calls if c.resolved_by), None)
        reason = next((c.message for c in req.calls if c.message), None)
        text = "🚫 Cancelled" + (f" by {inert(who)}" if who else "")
        return text + (f": {cut(inert(reason), 200)}" if reason else "")
    parts = []
    for action, call in zip(req.action_requests, req.calls, strict=True):
        label = call.resolution or "pending"
        mark = MARK.get(label, "")
        if call.resolved_by == "timeout" and label == "expired":
            text = f"{mark} Expired — no decision before the deadline"
        elif call.resolved_by == "timeout":
            text = f"{mark} Approved on timeout (on_timeout: allow)"
        else:
            verb = "Answered" if label == "responded" else label.capitalize()
            text = f"{mark} {verb} by {inert(shown_actor(str(call.resolved_by)))}"
            if call.message and label == "rejected":
                text += f": {cut(inert(call.message), 200)}"
        if len(req.calls) > 1:
            text += f" ({inert(action.name)})"
        parts.append(text.strip())
    return "; ".join(dict.fromkeys(parts))


def cli_hint(req: ApprovalRequest) -> str:
    """How to decide without a web server."""
    if req.inquiry is not None and req.inquiry.is_form:
        return f"Answer with: signoff respond {req.id} --as <you> --answers '{{\"<id>\": ...}}'"
    if req.kind == "inquiry":
        return f"Answer with: signoff respond {req.id} --as <you> -m <answer>"
    return (
        f"Decide with: signoff approve {req.id} --as <you>  "
        f"(or: signoff reject {req.id} --as <you> -m <reason>)"
    )
