"""Questions for a human and the answers they may give, as data and pure checks.

An inquiry is either one question (``question``, ``choices``, ``default_answer``: the original
form, answered with a string in a respond decision's ``message``) or a form of several
(``questions``: one round, each question with an ``id``), answered with ``answers``, a JSON
object keyed by question id — a string, or a list of strings where ``multiple`` is set.

``choices`` bind: an answer outside them is refused unless ``allow_other`` is true. The check
is one function, :func:`check_response`, run on every decision whatever surface it came from
(MCP tool, REST API, CLI, web inbox, chat buttons), inside the store's write transaction, so
a refused answer changes nothing and the inquiry stays pending.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from signoff.model.errors import DecisionError, InvalidInput

Answer = str | list[str]
Answers = dict[str, Answer]
TextFormat = Literal["text", "markdown"]

#: The id of the one question of the original single-question form.
SINGLE_ID = "answer"
QUESTION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_QUESTIONS = 20
MAX_CHOICES = 50


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Question(_Model):
    """One question of a form; ``default_answer`` is a list where ``multiple`` is set."""

    id: str
    question: str
    choices: list[str] | None = None
    multiple: bool = False
    default_answer: Answer | None = None
    allow_other: bool = False


class Inquiry(_Model):
    """A question for a human (``kind: inquiry``), answered with a ``respond`` decision.

    With ``questions`` (a form), ``question`` is the form's title (its first question unless
    the agent gave one) and the answer is ``answers`` keyed by question id."""

    question: str
    choices: list[str] | None = None
    default_answer: str | None = None
    # The newer fields appear on the wire only when set: the single-question form keeps its
    # original shape.
    allow_other: bool = Field(default=False, exclude_if=lambda v: v is False)
    questions: list[Question] | None = Field(default=None, exclude_if=lambda v: v is None)
    format: TextFormat = Field(default="text", exclude_if=lambda v: v == "text")

    @property
    def is_form(self) -> bool:
        return self.questions is not None

    def all_questions(self) -> list[Question]:
        """The form's questions, or the single question as one with id ``answer``."""
        if self.questions is not None:
            return list(self.questions)
        return [
            Question(
                id=SINGLE_ID,
                question=self.question,
                choices=self.choices,
                default_answer=self.default_answer,
                allow_other=self.allow_other,
            )
        ]


# ---------------------------------------------------------------------- asking
def make_inquiry(
    question: str | None = None,
    *,
    choices: Sequence[str] | None = None,
    default_answer: str | None = None,
    allow_other: bool = False,
    questions: Sequence[Mapping[str, Any] | Question] | None = None,
    format: TextFormat = "text",
) -> Inquiry:
    """A checked inquiry; :class:`InvalidInput` names the bad field (``questions[1].id``)."""
    if format not in ("text", "markdown"):
        raise InvalidInput("format is text or markdown", field="format")
    if questions is None:
        text = (question or "").strip()
        if not text:
            raise InvalidInput("ask a question (a non-empty string)", field="question")
        single = Question(
            id=SINGLE_ID,
            question=text,
            choices=list(choices) if choices else None,
            default_answer=default_answer,
            allow_other=allow_other,
        )
        _check_question(single, "")
        return Inquiry(
            question=text,
            choices=single.choices,
            default_answer=default_answer,
            allow_other=allow_other,
            format=format,
        )
    if choices or default_answer is not None:
        raise InvalidInput(
            "with questions, give choices and default_answer per question",
            field="choices" if choices else "default_answer",
        )
    form = _parse_questions(questions)
    title = (question or "").strip() or form[0].question
    return Inquiry(question=title, questions=form, format=format)


def _parse_questions(questions: Sequence[Mapping[str, Any] | Question]) -> list[Question]:
    if isinstance(questions, (str, Mapping)) or not questions:
        raise InvalidInput("give a list of one or more questions", field="questions")
    if len(questions) > MAX_QUESTIONS:
        raise InvalidInput(f"at most {MAX_QUESTIONS} questions in one round", field="questions")
    out: list[Question] = []
    seen: set[str] = set()
    for i, raw in enumerate(questions):
        where = f"questions[{i}]"
        q = raw if isinstance(raw, Question) else _question_from(raw, where)
        if q.id in seen:
            raise InvalidInput(f"question id {q.id!r} is used twice", field=f"{where}.id")
        seen.add(q.id)
        _check_question(q, f"{where}.")
        out.append(q)
    return out


def _question_from(raw: object, where: str) -> Question:
    if not isinstance(raw, Mapping):
        raise InvalidInput("each question is an object {id, question, …}", field=where)
    try:
        return Question.model_validate(dict(raw))
    except ValueError as exc:
        errors = getattr(exc, "errors", None)
        first = errors()[0] if callable(errors) else {"loc": (), "msg": str(exc)}
        loc = ".".join(str(p) for p in first["loc"])
        raise InvalidInput(str(first["msg"]), field=f"{where}.{loc}" if loc else where) from None


def _check_question(q: Question, prefix: str) -> None:
    if not QUESTION_ID.match(q.id):
        raise InvalidInput("a question id is 1-64 letters, digits, _ or -", field=f"{prefix}id")
    if not q.question.strip():
        raise InvalidInput("ask a question (a non-empty string)", field=f"{prefix}question")
    if q.choices is not None:
        if len(q.choices) > MAX_CHOICES:
            raise InvalidInput(f"at most {MAX_CHOICES} choices", field=f"{prefix}choices")
        if len(set(q.choices)) != len(q.choices) or any(not c.strip() for c in q.choices):
            raise InvalidInput(
                "choices must be distinct, non-empty strings", field=f"{prefix}choices"
            )
    if q.multiple and not q.choices:
        raise InvalidInput("multiple needs choices to pick from", field=f"{prefix}multiple")
    if q.default_answer is not None:
        try:
            q.default_answer = _checked_value(q, q.default_answer)
        except _Refused as exc:
            raise InvalidInput(
                f"the default answer {exc}", field=f"{prefix}default_answer"
            ) from None


# ---------------------------------------------------------------------- answering
class _Refused(Exception):
    pass


def check_response(
    inquiry: Inquiry | None, message: str | None, answers: Mapping[str, Any] | None, where: str
) -> tuple[str | None, Answers | None]:
    """The (message, answers) a respond decision stores, or a :class:`DecisionError` naming
    ``{where}.message`` or ``{where}.answers.<id>``.

    Without an inquiry (a tool call reviewed with ``respond``) the answer is the message, as
    before. The single-question form takes its answer in ``message`` (or ``answers.answer``);
    a form takes ``answers`` (or ``message`` when it has exactly one question)."""
    if inquiry is None:
        if answers is not None:
            raise DecisionError(
                "answers are only for inquiries; give the answer in `message`",
                field=f"{where}.answers",
            )
        return _required_message(message, where), None
    if not inquiry.is_form:
        if answers is not None and message is None:
            message = _single_from(answers, where)
        elif answers is not None:
            raise DecisionError(
                "this inquiry asks one question: give its answer in `message` only",
                field=f"{where}.answers",
            )
        text = _required_message(message, where)
        (single,) = inquiry.all_questions()
        try:
            return _checked_value(single, text), None  # type: ignore[return-value]
        except _Refused as exc:
            raise DecisionError(f"the answer {exc}", field=f"{where}.message") from None
    questions = inquiry.all_questions()
    if answers is None:
        if message is not None and len(questions) == 1:
            answers = {questions[0].id: message}
            message = None
        else:
            ids = ", ".join(q.id for q in questions)
            raise DecisionError(
                f"this inquiry asks {len(questions)} questions ({ids}): give `answers`, "
                "an object keyed by question id",
                field=f"{where}.answers",
            )
    return message, _checked_answers(questions, answers, where)


def _single_from(answers: Mapping[str, Any], where: str) -> str:
    extra = [k for k in answers if k != SINGLE_ID]
    if extra:
        raise DecisionError(
            f"this inquiry asks one question, id {SINGLE_ID!r}; no question {extra[0]!r}",
            field=f"{where}.answers.{extra[0]}",
        )
    value = answers.get(SINGLE_ID)
    if not isinstance(value, str):
        raise DecisionError("the answer is a string", field=f"{where}.answers.{SINGLE_ID}")
    return value


def _required_message(message: str | None, where: str) -> str:
    if not (message or "").strip():
        raise DecisionError(
            "a respond decision needs the answer in `message`", field=f"{where}.message"
        )
    assert message is not None
    return message.strip()


def _checked_answers(questions: list[Question], answers: Mapping[str, Any], where: str) -> Answers:
    if not isinstance(answers, Mapping):
        raise DecisionError("answers is an object keyed by question id", field=f"{where}.answers")
    known = {q.id for q in questions}
    for key in answers:
        if key not in known:
            raise DecisionError(
                f"no question {key!r}; questions: {', '.join(q.id for q in questions)}",
                field=f"{where}.answers.{key}",
            )
    out: Answers = {}
    for q in questions:
        field = f"{where}.answers.{q.id}"
        if q.id not in answers:
            if q.multiple:
                out[q.id] = []  # nothing ticked is an answer
                continue
            raise DecisionError(f"question {q.id!r} has no answer", field=field)
        try:
            out[q.id] = _checked_value(q, answers[q.id])
        except _Refused as exc:
            raise DecisionError(f"the answer {exc}", field=field) from None
    return out


def _checked_value(q: Question, value: object) -> Answer:
    """``value`` as stored (trimmed; a list for ``multiple``), or :class:`_Refused`."""
    if q.multiple:
        picked = [value] if isinstance(value, str) else value
        if not isinstance(picked, list) or not all(isinstance(v, str) for v in picked):
            raise _Refused("is a list of strings (the question allows several)")
        out: list[str] = []
        for v in (v.strip() for v in picked):
            _check_choice(q, v)
            if v not in out:
                out.append(v)
        return out
    if not isinstance(value, str):
        raise _Refused("is a string (the question allows one answer)")
    text = value.strip()
    _check_choice(q, text)
    return text


def _check_choice(q: Question, text: str) -> None:
    if not text:
        raise _Refused("is empty")
    if q.choices and not q.allow_other and text not in q.choices:
        shown = ", ".join(repr(c) for c in q.choices[:10])
        raise _Refused(
            f"{text[:80]!r} is not one of the choices ({shown}); the inquiry does not "
            "allow other answers (allow_other: false)"
        )


def answer_text(answers: Answers | None, message: str | None) -> str | None:
    """One line for surfaces that show a single answer: ``id: answer; id: a, b``."""
    if answers is None:
        return message
    parts = [f"{k}: {', '.join(v) if isinstance(v, list) else v}" for k, v in answers.items()]
    return "; ".join(parts)


# ---------------------------------------------------------------------- the fallback judge
FallbackState = Literal["waiting", "asking", "answered", "failed"]


class InquiryFallback(_Model):
    """When a judge answers an inquiry nobody answered (``inquiries.fallback``), and how far
    it got. Stored on the request, so the time survives restarts and the sweeper of any
    process (or replica) can take it; ``asking`` is a claim until ``claimed_until``."""

    judge: str
    at: datetime
    state: FallbackState = "waiting"
    claimed_until: datetime | None = None
    attempts: int = 0
    error: str | None = None

    def due(self) -> datetime | None:
        """When the sweeper must look next for the fallback (None: nothing left to do)."""
        if self.state == "waiting":
            return self.at
        if self.state == "asking":
            return self.claimed_until
        return None
