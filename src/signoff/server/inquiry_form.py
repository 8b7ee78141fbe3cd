"""An inquiry as the inbox shows and reads it: the question (markdown rendered safely where
the agent asked for it), one input per question of a form — checkboxes where ``multiple``,
radio buttons (a select for long lists) where the choices bind, a text box beside them where
``allow_other``, a text area otherwise — and the posted form back as ``answers``.

What is posted is only collected here; the gate checks it like any other answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from markupsafe import Markup

from signoff.model import Answers, Inquiry, Question
from signoff.server.markdown import render_markdown

#: More choices than this become a select instead of radio buttons.
RADIO_LIMIT = 6


class MultiForm(Protocol):
    """A posted form with repeated keys (Starlette's ``FormData``)."""

    def getlist(self, key: Any) -> list[Any]: ...


@dataclass
class QuestionView:
    id: str
    text: str
    html: Markup | None  # the rendered markdown, for format: markdown
    kind: str  # "checkboxes" | "radio" | "select" | "text"
    choices: list[str]
    allow_other: bool
    selected: list[str] = field(default_factory=list)  # default or posted picks
    other: str = ""  # default or posted free answer
    error: str | None = None


def show_text(inquiry: Inquiry, text: str) -> Markup | None:
    """The rendered markdown of ``text`` when the inquiry asked for markdown, else None."""
    return render_markdown(text) if inquiry.format == "markdown" else None


def question_views(
    inquiry: Inquiry, error: tuple[str | None, str] | None = None
) -> list[QuestionView]:
    """A form's questions as inputs; ``error`` is ``(field, message)`` of a refused answer."""
    if not inquiry.is_form:
        return []
    views = [_view(inquiry, q) for q in inquiry.all_questions()]
    if error is not None:
        match = re.search(r"answers\.([A-Za-z0-9_-]+)", error[0] or "")
        target = next((v for v in views if match and v.id == match.group(1)), None)
        if target is not None:
            target.error = error[1]
    return views


def _view(inquiry: Inquiry, q: Question) -> QuestionView:
    default = q.default_answer
    picks = default if isinstance(default, list) else ([default] if default else [])
    if q.multiple:
        kind = "checkboxes"
    elif q.choices:
        kind = "radio" if len(q.choices) <= RADIO_LIMIT else "select"
    else:
        kind = "text"
    in_choices = [p for p in picks if q.choices and p in q.choices]
    return QuestionView(
        id=q.id,
        text=q.question,
        html=show_text(inquiry, q.question),
        kind=kind,
        choices=list(q.choices or []),
        allow_other=q.allow_other,
        selected=in_choices,
        other="" if in_choices else ", ".join(picks),
    )


def answers_from_form(inquiry: Inquiry, form: MultiForm) -> Answers:
    """The posted answers keyed by question id (``answer.<id>``, ``other.<id>``); a question
    left blank is left out, so the gate names it."""
    answers: Answers = {}
    for q in inquiry.all_questions():
        picked = [v.strip() for v in form.getlist(f"answer.{q.id}") if isinstance(v, str)]
        picked = [v for v in picked if v]
        other = next(
            (v.strip() for v in form.getlist(f"other.{q.id}") if isinstance(v, str) and v.strip()),
            "",
        )
        if q.multiple:
            answers[q.id] = [*picked, other] if other else picked
        elif other or picked:
            answers[q.id] = other or picked[0]
    return answers
