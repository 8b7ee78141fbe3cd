"""A judge's answer, strictly: exactly ``{"verdict", "reason"}`` or a :class:`JudgeError`.

Strict on purpose: an answer with extra keys, an unknown verdict, prose around the JSON or
two JSON objects is not guessed at, because a judge that was talked into a different
format may have been talked into a different verdict too. The one tolerance is a single
JSON object wrapped in a Markdown ```` ```json ```` fence and nothing else, which some
models add even when asked not to.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from signoff.judges.base import JudgeAnswer, JudgeError
from signoff.model.intent import INTENT_VERDICTS

MAX_REASON = 1000
MAX_ANSWER = 64 * 1024  # characters; a longer answer is not a verdict
_KEYS = frozenset({"verdict", "reason"})
_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n(.*)\n[ \t]*```\Z", re.DOTALL)


def parse_answer(raw: str | Mapping[str, Any]) -> JudgeAnswer:
    """The answer in ``raw`` (JSON text or an already decoded mapping); JudgeError if not exact."""
    data = _decode(raw) if isinstance(raw, str) else raw
    if not isinstance(data, Mapping):
        raise JudgeError(f"the answer is not a JSON object (got {type(data).__name__})")
    keys = set(data)
    if keys != _KEYS:
        extra = sorted(str(k) for k in keys - _KEYS)
        missing = sorted(_KEYS - keys)
        detail = "; ".join(
            part
            for part in (
                f"unexpected keys: {', '.join(extra)}" if extra else "",
                f"missing: {', '.join(missing)}" if missing else "",
            )
            if part
        )
        raise JudgeError(f'the answer must have exactly "verdict" and "reason" ({detail})')
    verdict = data["verdict"]
    if not isinstance(verdict, str) or verdict not in INTENT_VERDICTS:
        raise JudgeError(
            f"unknown verdict {_shown(verdict)}; expected one of {', '.join(INTENT_VERDICTS)}"
        )
    reason = data["reason"]
    if not isinstance(reason, str) or not reason.strip():
        raise JudgeError("the answer's reason must be a non-empty string")
    return JudgeAnswer(verdict=verdict, reason=reason.strip()[:MAX_REASON])


def _decode(text: str) -> Any:
    if len(text) > MAX_ANSWER:
        raise JudgeError(f"the answer is longer than {MAX_ANSWER} characters")
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if not text.startswith("{"):
        raise JudgeError("the answer is not a JSON object")
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise JudgeError(f"the answer is not valid JSON ({exc.msg} at {exc.pos})") from None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # {"verdict": "mismatch", "verdict": "consistent"} means two answers: refuse both.
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise JudgeError(f"the answer repeats the key {key!r}")
        found[key] = value
    return found


def _shown(value: object) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
