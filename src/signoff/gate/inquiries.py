"""Asking a human a question: an inquiry is a request whose one call is ``ask_human``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from signoff.gate.guard import raise_for
from signoff.model import ApprovalRequest, CallContext, Inquiry, ReviewSpec, ToolCall, Verdict

if TYPE_CHECKING:
    from signoff.gate.core import Gate


async def ask(
    gate: Gate,
    question: str,
    *,
    choices: Sequence[str] | None,
    default_answer: str | None,
    timeout: float,
    approvers: ReviewSpec | None,
    ctx: CallContext,
    wait: bool,
) -> str | ApprovalRequest:
    """Store the inquiry; with ``wait``, the answer (or the exception of a refusal)."""
    spec = approvers or ReviewSpec(
        allowed_decisions=("respond", "reject"),
        forbid_self_approval=False,
        timeout_s=timeout,
        description=question,
    )
    call = ToolCall(
        "ask_human",
        {"question": question, "choices": list(choices or []), "default_answer": default_answer},
    )
    verdict = Verdict.require_approval(
        "inquiry", spec, policy_hash=gate.policy.short_hash, description=question
    )
    inquiry = Inquiry(
        question=question,
        choices=list(choices) if choices else None,
        default_answer=default_answer,
    )
    sub = await gate.asubmit_checked([call], [verdict], ctx, inquiry=inquiry)
    assert sub.request is not None
    if not wait:
        return sub.request
    req = await gate.await_request(sub.request.id)
    state = req.call(call.id)
    if state.resolution == "responded":
        return state.message or ""
    raise_for(req, state)
