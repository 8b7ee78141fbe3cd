"""Asking a human a question: an inquiry is a request whose one call is ``ask_human``.

One question (answered with a string) or a form of several (``questions``, answered with an
object keyed by question id); :mod:`signoff.model.inquiries` checks both, and every answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from signoff.gate.guard import raise_for
from signoff.model import (
    Answers,
    ApprovalRequest,
    CallContext,
    Question,
    ReviewSpec,
    ToolCall,
    Verdict,
    make_inquiry,
)
from signoff.model.inquiries import TextFormat

if TYPE_CHECKING:
    from signoff.gate.core import Gate


async def ask(
    gate: Gate,
    question: str | None,
    *,
    choices: Sequence[str] | None,
    default_answer: str | None,
    allow_other: bool = False,
    questions: Sequence[Mapping[str, Any] | Question] | None = None,
    format: TextFormat = "text",
    timeout: float,
    approvers: ReviewSpec | None,
    ctx: CallContext,
    wait: bool,
) -> str | Answers | ApprovalRequest:
    """Store the inquiry; with ``wait``, the answer — a string, or for ``questions`` an object
    keyed by question id — or the exception of a refusal. Bad input raises
    :class:`~signoff.model.InvalidInput` naming the field before anything is stored."""
    inquiry = make_inquiry(
        question,
        choices=choices,
        default_answer=default_answer,
        allow_other=allow_other,
        questions=questions,
        format=format,
    )
    inquiry = await gate.inquiry_judges.suggest(inquiry, ctx)
    spec = approvers or ReviewSpec(
        allowed_decisions=("respond", "reject"),
        forbid_self_approval=False,
        timeout_s=timeout,
        description=inquiry.question,
    )
    args: dict[str, Any] = {
        "question": inquiry.question,
        "choices": list(inquiry.choices or []),
        "default_answer": inquiry.default_answer,
    }
    if inquiry.questions is not None:
        args["questions"] = [q.model_dump(exclude_defaults=True) for q in inquiry.questions]
    if inquiry.allow_other:
        args["allow_other"] = True
    if inquiry.format != "text":
        args["format"] = inquiry.format
    call = ToolCall("ask_human", args)
    verdict = Verdict.require_approval(
        "inquiry", spec, policy_hash=gate.policy.short_hash, description=inquiry.question
    )
    sub = await gate.asubmit_checked([call], [verdict], ctx, inquiry=inquiry)
    assert sub.request is not None
    if not wait:
        return sub.request
    req = await gate.await_request(sub.request.id, current=sub.request)
    state = req.call(call.id)
    if state.resolution == "responded":
        if inquiry.is_form:
            return dict(state.answers or {})
        return state.message or ""
    raise_for(req, state)
