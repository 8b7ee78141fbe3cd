"""Judges the inquiry fallback tests name in their policies (``kind: python``)."""

from __future__ import annotations

import threading
from typing import Any

from signoff.judges.inquiry import InquiryQuestion

#: what the inquiry judge was asked, in order (with its ctx)
asked: list[tuple[InquiryQuestion, dict[str, Any]]] = []
#: the next answer, by question text (default: the first choice, or "yes")
answers: dict[str, Any] = {}
#: set by a test to let :func:`held` answer (a human answers first in the meantime)
release = threading.Event()
#: set by :func:`held` once it was asked
holding = threading.Event()
_lock = threading.Lock()


def reset() -> None:
    asked.clear()
    answers.clear()
    release.clear()
    holding.clear()


def intent(request: Any) -> Any:  # the intent side of the judge: not used here
    return {"verdict": "unclear", "reason": "not an intent judge"}


def answer(inquiry: InquiryQuestion, ctx: dict[str, Any]) -> Any:
    with _lock:
        asked.append((inquiry, dict(ctx)))
    found = answers.get(inquiry.question)
    if isinstance(found, Exception):
        raise found
    if found is not None:
        return found
    return inquiry.choices[0] if inquiry.choices else "yes"


def held(inquiry: InquiryQuestion, ctx: dict[str, Any]) -> Any:
    """Answers only once the test releases it (so a human's answer lands first)."""
    with _lock:
        asked.append((inquiry, dict(ctx)))
    holding.set()
    if not release.wait(30):
        raise TimeoutError("the test never released the judge")
    return inquiry.choices[0] if inquiry.choices else "yes"


async def async_answer(inquiry: InquiryQuestion, ctx: dict[str, Any]) -> Any:
    return answer(inquiry, ctx)
