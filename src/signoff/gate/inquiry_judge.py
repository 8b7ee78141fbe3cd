"""Judges standing in for humans on inquiries: the fallback answer and the suggestion.

* **fallback** (``inquiries.fallback``): every inquiry gets a fallback time on the request
  (``ApprovalRequest.fallback``), which the stores index with the deadlines. The sweeper of
  whichever process or replica finds it due claims it (:func:`~signoff.model.fallback.
  claim_fallback`, one conditional update: one claimer), asks the judge off the sweep, and
  records the answer as a ``respond`` decision by ``judge:NAME`` — checked like a human's.
  A human who answered first wins; a failed or invalid answer is audited
  (``fallback_failed``) and the inquiry stays pending for the humans until its deadline.
* **suggest** (``inquiries.suggest``, and ``signoff inquiry-server --suggester``): the judge's
  answer, if valid, becomes ``default_answer`` before the inquiry is stored; bounded by the
  judge's timeout, and a failure only means no suggestion.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from signoff.gate.inquiry_settings import InquirySettings, from_sections
from signoff.judges.base import JudgeError
from signoff.judges.inquiry import InquiryQuestion, InquiryReply
from signoff.model import AlreadyDecided, ApprovalRequest, CallContext, SignoffError, utcnow
from signoff.model.errors import DecisionError
from signoff.model.fallback import claim_fallback, fallback_failed, judge_respond
from signoff.model.inquiries import Inquiry, InquiryFallback, check_response
from signoff.model.resolution import Transition

if TYPE_CHECKING:
    from signoff.gate.core import Gate

log = logging.getLogger("signoff.gate")

#: How long a fallback claim outlives the judge's timeout (then another sweeper may retry).
CLAIM_MARGIN_S = 30.0


class InquiryAnswerer(Protocol):
    """What answers an inquiry in a human's place: every judge kind, or a suggester."""

    name: str

    async def answer_inquiry(self, question: InquiryQuestion) -> InquiryReply: ...


def question_of(inquiry: Inquiry, ctx: Mapping[str, Any]) -> InquiryQuestion:
    """What a judge is shown of ``inquiry`` (all of it untrusted data)."""
    questions = None
    if inquiry.questions is not None:
        questions = [
            q.model_dump(include={"id", "question", "choices", "multiple", "allow_other"})
            for q in inquiry.questions
        ]
    return InquiryQuestion(
        question=inquiry.question,
        choices=inquiry.choices,
        allow_other=inquiry.allow_other,
        questions=questions,
        user_request=ctx.get("user_request"),
        reasoning=ctx.get("reasoning"),
        context={k: v for k, v in ctx.items() if k not in ("user_request", "reasoning")},
    )


def _context(ctx: CallContext | ApprovalRequest) -> dict[str, Any]:
    principal = ctx.principal.id
    return {
        "user_request": ctx.user_request,
        "reasoning": ctx.reasoning,
        "principal": principal,
        "agent": ctx.agent,
        "thread": ctx.thread,
    }


async def suggested(
    answerer: InquiryAnswerer, inquiry: Inquiry, ctx: Mapping[str, Any], timeout_s: float
) -> Inquiry:
    """``inquiry`` with the answerer's answer as its ``default_answer`` (per question for a
    form, where the agent gave none) — or unchanged when the answerer fails, is slower than
    ``timeout_s`` or answers outside binding choices. The one code path of
    ``inquiries.suggest`` and ``inquiry-server --suggester``."""
    if not inquiry.is_form and inquiry.default_answer is not None:
        return inquiry
    try:
        async with asyncio.timeout(timeout_s):
            reply = await answerer.answer_inquiry(question_of(inquiry, ctx))
        message, answers = check_response(inquiry, reply.answer, reply.answers, "suggestion")
    except (TimeoutError, JudgeError, DecisionError) as exc:
        log.warning("no suggested answer from %s: %s", answerer.name, exc or "timed out")
        return inquiry
    except Exception as exc:  # a suggester's bug only means no suggestion
        log.warning("the suggester %s failed: %s: %s", answerer.name, type(exc).__name__, exc)
        return inquiry
    if answers is None:
        return inquiry.model_copy(update={"default_answer": message})
    assert inquiry.questions is not None
    questions = [
        q
        if q.default_answer is not None or q.id not in answers
        else q.model_copy(update={"default_answer": answers[q.id]})
        for q in inquiry.questions
    ]
    return inquiry.model_copy(update={"questions": questions})


class InquiryJudges:
    """The gate's ``inquiries:`` runtime: stamps fallbacks, suggests, runs due fallbacks."""

    def __init__(self, gate: Gate, settings: InquirySettings) -> None:
        self.gate = gate
        self.settings = settings
        self._running: set[asyncio.Task[None]] = set()

    @classmethod
    def from_gate(cls, gate: Gate) -> InquiryJudges:
        policy = gate.policy
        filename = policy.path.name if policy.path else "signoff.yaml"
        return cls(gate, from_sections(policy.sections, filename=filename))

    def _judge(self, name: str) -> Any:
        return self.gate.intents.judges.get(name)

    # ---------------------------------------------------------------- creation
    def fallback_for(self, expires_in_s: float) -> InquiryFallback | None:
        """The fallback of a new inquiry with this deadline, or None (none configured, or the
        inquiry's own deadline comes first: the judge could never answer in time)."""
        fb = self.settings.fallback
        if fb is None:
            return None
        if fb.after >= expires_in_s:
            log.warning(
                "inquiry deadline %.0fs is not later than inquiries.fallback.after %.0fs: "
                "no fallback for this inquiry",
                expires_in_s,
                fb.after,
            )
            return None
        return InquiryFallback(judge=fb.judge, at=utcnow() + timedelta(seconds=fb.after))

    async def suggest(self, inquiry: Inquiry, ctx: CallContext) -> Inquiry:
        """``inquiries.suggest``: pre-fill the default answer (bounded by the judge's timeout)."""
        if self.settings.suggest is None:
            return inquiry
        judge = self._judge(self.settings.suggest.judge)
        if judge is None:
            return inquiry
        timeout = float(getattr(judge, "timeout_s", 10.0))
        return await suggested(judge, inquiry, _context(ctx), timeout)

    # ---------------------------------------------------------------- the fallback
    def claim(self, req: ApprovalRequest) -> Transition:
        """The sweeper's mutation for a due fallback (a no-op when another took it)."""
        timeout = 10.0
        if req.fallback is not None:
            judge = self._judge(req.fallback.judge)
            timeout = float(getattr(judge, "timeout_s", timeout))
        return claim_fallback(req, now=utcnow(), lease_s=timeout + CLAIM_MARGIN_S)

    def start(self, req: ApprovalRequest) -> None:
        """Ask the judge about the claimed ``req`` off the sweep (on the running loop)."""
        task = asyncio.ensure_future(self.answer(req))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def answer(self, req: ApprovalRequest) -> None:
        """Ask the judge and record its answer, or its failure; never raises."""
        assert req.fallback is not None and req.inquiry is not None
        name = req.fallback.judge
        judge = self._judge(name)
        try:
            if judge is None:
                raise JudgeError(f"judge {name!r} is not configured in this process")
            reply = await judge.answer_inquiry(question_of(req.inquiry, _context(req)))
            tr = await self.gate.update(
                req.id,
                lambda r: judge_respond(
                    r, name, message=reply.answer, answers=reply.answers, now=utcnow()
                ),
            )
        except AlreadyDecided:
            log.info("inquiry %s was answered before its fallback judge %s", req.id, name)
            return
        except asyncio.CancelledError:
            raise
        except (JudgeError, DecisionError) as exc:
            await self._failed(req.id, str(exc))
            return
        except Exception as exc:  # a judge's bug, or the store: the humans keep the inquiry
            log.exception("the fallback judge %s of inquiry %s failed", name, req.id)
            await self._failed(req.id, f"{type(exc).__name__}: {exc}")
            return
        await self.gate.after_change(tr)

    async def _failed(self, request_id: str, reason: str) -> None:
        try:
            tr = await self.gate.update(
                request_id, lambda r: fallback_failed(r, reason, now=utcnow())
            )
            await self.gate.after_change(tr)
        except SignoffError as exc:
            log.warning("recording the failed fallback of %s: %s", request_id, exc)
        except Exception:
            log.exception("recording the failed fallback of %s failed", request_id)

    async def drain(self) -> None:
        """Until every judge asked so far has answered (and its answer is recorded)."""
        while self._running:
            await asyncio.wait(list(self._running))

    async def stop(self) -> None:
        for task in list(self._running):
            task.cancel()
        if self._running:
            await asyncio.wait(list(self._running), timeout=5)
