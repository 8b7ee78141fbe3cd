"""Requests as the inbox shows them: redacted arguments, who may do what, edit fields.

Pure functions from an :class:`ApprovalRequest` and the viewer to plain data for the
templates, so the templates stay logic-free and the rules live in one testable place.

The arguments shown are the ones that will run (``calls[i].action``): after an edit, the
edited ones, with what the edit changed and the original next to them. Edit fields start
from them too, so a second approver edits what the first one left.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from markupsafe import Markup

from signoff.model import Answers, ApprovalRequest, CallState, Inquiry, ReviewConfig, chains
from signoff.model.fallback import shown_actor
from signoff.model.text import ABSENT, changed_args, inert
from signoff.policy.redact import REDACTED as REDACTED  # what a masked value looks like
from signoff.policy.redact import NameMatcher, mask, restore
from signoff.server.access import decidable_calls, self_approval_only_reject
from signoff.server.identity import Identity
from signoff.server.inquiry_form import QuestionView, question_views, show_text

FieldKind = str  # "text" | "integer" | "number" | "boolean" | "json" | "choice"


def redact(value: Any, secret_key: NameMatcher | None) -> Any:
    """A copy of ``value`` with the values of secret-named keys (any depth) masked."""
    return mask(value, secret_key)


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


@dataclass
class EditField:
    """One editable argument as a form input (types from the tool's schema if known)."""

    name: str
    kind: FieldKind
    value: str
    checked: bool = False
    secret: bool = False
    choices: list[str] = field(default_factory=list)
    attrs: dict[str, str] = field(default_factory=dict)
    error: str | None = None


@dataclass
class ArgChangeView:
    """One argument an edit changed, as shown (JSON, secrets redacted)."""

    name: str
    before: str
    after: str


@dataclass
class CallView:
    id: str
    tool: str
    description: str
    rule: str
    reason: str | None
    risk: str | None
    args_json: str
    resolution: str | None
    by: str | None
    at: datetime | None
    message: str | None
    quorum: int
    approvals: list[str]
    execution: str | None
    allowed: list[str]  # decision types this viewer may use now
    fields: list[EditField]
    thread_ok: bool
    error: str | None = None
    edit_error: str | None = None
    changes: list[ArgChangeView] = field(default_factory=list)  # empty unless edited
    original_json: str = ""  # the arguments as first requested, when edited
    grant_text: str | None = None  # what "also approve later calls" would cover, exactly
    answers: list[tuple[str, str]] = field(default_factory=list)  # a form's (question, answer)
    intent: dict[str, Any] | None = None  # the intent judge's answer (model output)
    chain: str = ""  # an approval chain spelled out (empty without one)
    progress: str = ""  # how far its chain is: "stage 2 of 2: 1 of 2 finance approvals"


@dataclass
class RequestPage:
    req: ApprovalRequest
    calls: list[CallView]
    can_decide: bool
    question: str | None
    choices: list[str]
    default_answer: str | None
    question_html: Markup | None = None  # the question as rendered markdown (format: markdown)
    questions: list[QuestionView] = field(default_factory=list)  # a form's inputs
    free_answer: bool = True  # the single question takes an answer outside its choices


def present(
    req: ApprovalRequest,
    who: Identity,
    secret_key: NameMatcher | None,
    error: tuple[str | None, str | None, str] | None = None,
    posted: dict[str, str] | None = None,
    grant_texts: Mapping[str, str] | None = None,
) -> RequestPage:
    """``error`` is ``(tool_call_id, field, message)`` from a refused decision;
    ``grant_texts`` the sentence of the grant approving each call with ``scope: thread``
    would create (no sentence: no such checkbox)."""
    mine = decidable_calls(who, req)
    calls = []
    for action, cfg, state in zip(req.action_requests, req.review_configs, req.calls, strict=True):
        allowed = _allowed(who, req, cfg, state.tool_call_id) if state.tool_call_id in mine else []
        runs = state.action.args
        fields = _edit_fields(runs, cfg, secret_key) if "edit" in allowed else []
        view = CallView(
            id=state.tool_call_id,
            tool=action.name,
            description=action.description,
            rule=action.rule,
            reason=action.reason,
            intent=action.intent,
            risk=action.risk,
            args_json=pretty(redact(runs, secret_key)),
            resolution=state.resolution,
            by=shown_actor(state.resolved_by) if state.resolved_by else None,
            at=state.resolved_at,
            message=state.message,
            quorum=state.quorum,
            approvals=list(state.approvals),
            execution=state.execution,
            allowed=allowed,
            fields=fields,
            thread_ok=cfg.allow_thread_approval and cfg.approvers.needs_one,
            chain=chains.describe(cfg.approvers) if cfg.approvers.chained else "",
            progress=chains.progress(cfg, state),
            changes=arg_changes(action.args, runs, secret_key),
            grant_text=(grant_texts or {}).get(state.tool_call_id)
            if "approve" in allowed
            else None,
        )
        if view.changes:
            view.original_json = pretty(redact(action.args, secret_key))
        if req.inquiry is not None and state.answers is not None:
            view.answers = _answered(req.inquiry, state.answers)
        answer_error = error is not None and ".answers." in (error[1] or "")
        if error is not None and error[0] == state.tool_call_id and not answer_error:
            _attach_error(view, error[1], error[2], posted or {})
        calls.append(view)
    return _page(req, calls, (error[1], error[2]) if error is not None else None)


def _page(
    req: ApprovalRequest, calls: list[CallView], error: tuple[str | None, str] | None
) -> RequestPage:
    inquiry = req.inquiry
    page = RequestPage(
        req=req,
        calls=calls,
        can_decide=any(c.allowed for c in calls),
        question=inquiry.question if inquiry else None,
        choices=list(inquiry.choices or []) if inquiry else [],
        default_answer=inquiry.default_answer if inquiry else None,
    )
    if inquiry is None:
        return page
    page.free_answer = not inquiry.choices or inquiry.allow_other
    page.questions = question_views(inquiry, error)
    if page.questions and inquiry.question == page.questions[0].text:
        page.question = None  # a form without a title of its own: the questions say it all
    if page.question is not None:
        page.question_html = show_text(inquiry, page.question)
    return page


def _answered(inquiry: Inquiry, answers: Answers) -> list[tuple[str, str]]:
    out = []
    for q in inquiry.all_questions():
        value = answers.get(q.id)
        text = ", ".join(value) if isinstance(value, list) else (value or "")
        out.append((q.question, text or "—"))
    return out


def arg_changes(
    before: dict[str, Any], after: dict[str, Any], secret_key: NameMatcher | None
) -> list[ArgChangeView]:
    """What an edit changed, each side as compact JSON with secrets redacted."""

    def side(name: str, value: Any) -> str:
        if value is ABSENT:
            return "(absent)"
        shown = redact({name: value}, secret_key)[name]
        return json.dumps(shown, ensure_ascii=False, default=str)

    return [
        ArgChangeView(c.name, side(c.name, c.before), side(c.name, c.after))
        for c in changed_args(before, after)
    ]


def _allowed(who: Identity, req: ApprovalRequest, cfg: ReviewConfig, call_id: str) -> list[str]:
    if self_approval_only_reject(who, req, call_id):
        return [d for d in cfg.allowed_decisions if d == "reject"]
    if cfg.approvers.chained:  # anyone in the chain may reject; approving waits for the stage
        call = req.call(call_id)

        def refused(edit: bool) -> bool:
            why = chains.refusal(
                cfg, call, who.name, who.roles, escalated=req.escalated, key=who.key, edit=edit
            )
            return why is not None

        return [
            d
            for d in cfg.allowed_decisions
            if not (d == "approve" and refused(False)) and not (d == "edit" and refused(True))
        ]
    return list(cfg.allowed_decisions)


def _attach_error(
    view: CallView, field_path: str | None, message: str, posted: dict[str, str]
) -> None:
    """Put the error next to the input it is about, and keep what the person typed."""
    for f in view.fields:
        if f"arg.{f.name}" in posted and not f.secret:
            f.value = posted[f"arg.{f.name}"]
    if field_path:
        match = re.search(r"edited_action\.args\.([^.\[]+)", field_path)
        if match:
            for f in view.fields:
                if f.name == match.group(1):
                    f.error = message
                    return
        if "edited_action" in field_path and view.fields:
            view.edit_error = message  # about the edited call as a whole (schema, policy)
            return
    view.error = message


def _edit_fields(
    args: dict[str, Any], cfg: ReviewConfig, secret_key: NameMatcher | None
) -> list[EditField]:
    """One field per editable argument; secret-named arguments are never editable, so they
    get none (the arguments above the form show them masked)."""
    names = [n for n in _editable(args, cfg) if not _secret(secret_key, n)]
    props = (cfg.args_schema or {}).get("properties", {})
    out = []
    for name in names:
        value = args.get(name)
        spec = props.get(name) if isinstance(props, dict) else None
        out.append(_field(name, value, spec if isinstance(spec, dict) else {}, secret_key))
    return out


def field_kind(value: Any, spec: dict[str, Any]) -> FieldKind:
    if isinstance(spec.get("enum"), list) and all(isinstance(v, str) for v in spec["enum"]):
        return "choice"
    declared = spec.get("type")
    if declared in ("integer", "number", "boolean"):
        return str(declared)
    if declared == "string":
        return "text"
    if declared in ("object", "array"):
        return "json"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str) or value is None:
        return "text"
    return "json"


def _editable(args: dict[str, Any], cfg: ReviewConfig) -> list[str]:
    return list(args) if cfg.editable_args == "*" else list(cfg.editable_args)


def _secret(secret_key: NameMatcher | None, name: str) -> bool:
    return bool(secret_key and secret_key.search(name))


def _field(
    name: str, value: Any, spec: dict[str, Any], secret_key: NameMatcher | None
) -> EditField:
    kind = field_kind(value, spec)
    secret = _secret(secret_key, name)
    attrs: dict[str, str] = {}
    for key, attr in (
        ("minimum", "min"),
        ("maximum", "max"),
        ("maxLength", "maxlength"),
        ("minLength", "minlength"),
    ):
        if isinstance(spec.get(key), int | float) and not isinstance(spec.get(key), bool):
            attrs[attr] = f"{spec[key]:g}" if isinstance(spec[key], float) else str(spec[key])
    if kind == "integer":
        attrs["step"] = "1"
    elif kind == "number":
        attrs["step"] = "any"
    if isinstance(spec.get("pattern"), str) and kind == "text":
        attrs["pattern"] = spec["pattern"]
    return EditField(
        name=name,
        kind=kind,
        value="" if secret else field_text(kind, mask(value, secret_key)),
        checked=value is True,
        secret=secret,
        choices=[str(c) for c in spec.get("enum", [])] if kind == "choice" else [],
        attrs=attrs,
    )


def field_text(kind: FieldKind, value: Any) -> str:
    """An argument as its form field shows it: inert, on one line (a text input would drop a
    line break). A field sent back unchanged keeps the original value (see parse_edit)."""
    if kind == "json":
        text = json.dumps(value, ensure_ascii=False, default=str)
    elif value is None or isinstance(value, bool):
        text = ""
    else:
        text = str(value)
    return inert(text)


class FieldError(ValueError):
    def __init__(self, name: str, message: str) -> None:
        self.name = name
        super().__init__(message)


def parse_edit(
    args: dict[str, Any],
    cfg: ReviewConfig,
    form: dict[str, str],
    secret_key: NameMatcher | None,
) -> dict[str, Any]:
    """The edited arguments from the form: ``args`` (those that would run now) with editable
    fields replaced.

    Types come from the server's own knowledge (schema, original value), never from hidden
    form fields. A secret-named argument is never taken from the form, and a nested secret
    shown masked in a JSON field gets its real value back (changing it is refused by the
    gate). A field sent back exactly as shown keeps the value itself (its shown form may
    differ from the value: see field_text).
    """
    edited = dict(args)
    props = (cfg.args_schema or {}).get("properties", {})
    for name in _editable(args, cfg):
        if _secret(secret_key, name):
            continue  # never editable: the value that runs is the one the agent sent
        spec = props.get(name) if isinstance(props, dict) else None
        kind = field_kind(args.get(name), spec if isinstance(spec, dict) else {})
        key = f"arg.{name}"
        if kind == "boolean":
            edited[name] = form.get(key) == "on"
            continue
        if key not in form:
            continue
        raw = form[key]
        if raw == "" and name not in args:
            continue  # left blank: an absent argument stays absent
        if name in args and raw == field_text(kind, mask(args[name], secret_key)):
            continue  # unchanged: keep the value itself, not its shown form
        edited[name] = restore(_parse(name, kind, raw), args.get(name))
    return edited


def _parse(name: str, kind: FieldKind, raw: str) -> Any:
    text = raw.strip()
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise FieldError(name, f"{name} must be a whole number") from None
    if kind == "number":
        try:
            number = float(text)
            return int(text) if re.fullmatch(r"-?\d+", text) else number
        except ValueError:  # also an integer over Python's 4300-digit limit
            raise FieldError(name, f"{name} must be a number") from None
    if kind == "json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise FieldError(name, f"{name} is not valid JSON: {exc.msg}") from None
        except (ValueError, RecursionError):  # 4300+ digit integers, absurd nesting
            raise FieldError(name, f"{name} is not valid JSON (too deep or too long)") from None
    return raw


def outcome_text(state: CallState) -> str:
    if state.resolution is None:
        return "waiting"
    who = f" by {shown_actor(state.resolved_by)}" if state.resolved_by else ""
    return f"{state.resolution}{who}"
