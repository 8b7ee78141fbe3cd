"""Judges the intent tests name in their policies (``kind: python``)."""

from __future__ import annotations

from typing import Any

from signoff.judges.base import JudgeRequest

#: what each judge was asked, in order
asked: list[JudgeRequest] = []
#: the next answers, by user request (default: consistent)
answers: dict[str, Any] = {}


def scripted(request: JudgeRequest) -> Any:
    asked.append(request)
    found = answers.get(request.user_request or "", {"verdict": "consistent", "reason": "ok"})
    if isinstance(found, Exception):
        raise found
    return found
