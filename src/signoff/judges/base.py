"""The contract between the gate and a judge.

The gate hands a judge a :class:`JudgeRequest` (the tool, its arguments with secret-named
values already redacted, and the untrusted ``user_request`` / ``reasoning`` of the call
context) and gets a :class:`JudgeAnswer`. A judge that cannot answer — transport error,
timeout, refusal, an answer that is not exactly ``{"verdict", "reason"}`` with a known
verdict — raises :class:`JudgeError`; the gate then applies the intent's ``on_error``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from signoff.model import SignoffError
from signoff.model.intent import IntentVerdict

if TYPE_CHECKING:
    from signoff.judges.inquiry import InquiryQuestion, InquiryReply


class JudgeError(SignoffError):
    """The judge gave no usable answer (the message says why, for the audit)."""


@dataclass(frozen=True, slots=True)
class JudgeRequest:
    tool: str
    args: Mapping[str, Any]  # secret-named values redacted
    user_request: str | None
    reasoning: str | None
    tool_description: str | None = None


@dataclass(frozen=True, slots=True)
class JudgeAnswer:
    verdict: IntentVerdict
    reason: str


class Judge(Protocol):
    """One ``judges:`` entry, ready to answer."""

    name: str
    #: What identifies the judge's behaviour in the answer cache, besides its name: the
    #: model and prompt version (e.g. ``"gpt-4.1-mini/intent-v1"``).
    cache_identity: str

    async def answer(self, request: JudgeRequest) -> JudgeAnswer: ...

    async def answer_inquiry(self, question: InquiryQuestion) -> InquiryReply:
        """Answer an inquiry in a human's place (``inquiries.fallback`` / ``suggest``);
        :class:`JudgeError` when it cannot (see :mod:`signoff.judges.inquiry`)."""
        ...

    async def aclose(self) -> None: ...
