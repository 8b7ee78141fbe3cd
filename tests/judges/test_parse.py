"""Answers are parsed strictly: exactly {"verdict", "reason"}, or a JudgeError."""

from __future__ import annotations

import pytest

from signoff.judges.base import JudgeAnswer, JudgeError
from signoff.judges.parse import MAX_REASON, parse_answer


@pytest.mark.parametrize("verdict", ["consistent", "mismatch", "unclear"])
def test_each_verdict_parses_from_text_and_mapping(verdict: str) -> None:
    expected = JudgeAnswer(verdict, "why")  # type: ignore[arg-type]
    assert parse_answer(f'{{"verdict": "{verdict}", "reason": "why"}}') == expected
    assert parse_answer({"verdict": verdict, "reason": "why"}) == expected


def test_reason_is_stripped_and_cut_to_1000_characters() -> None:
    answer = parse_answer({"verdict": "mismatch", "reason": "  " + "x" * 5000})
    assert answer.reason == "x" * MAX_REASON


@pytest.mark.parametrize(
    "fenced",
    [
        '```json\n{"verdict": "unclear", "reason": "r"}\n```',
        '```\n{"verdict": "unclear", "reason": "r"}\n```',
        '  ```json\n{"verdict": "unclear", "reason": "r"}\n```  \n',
    ],
)
def test_a_single_object_in_a_json_fence_is_accepted(fenced: str) -> None:
    assert parse_answer(fenced).verdict == "unclear"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"verdict": "consistent"}', "missing: reason"),
        ('{"reason": "r"}', "missing: verdict"),
        ('{"verdict": "consistent", "reason": "r", "score": 1}', "unexpected keys: score"),
        ('{"verdict": "Consistent", "reason": "r"}', "unknown verdict"),
        ('{"verdict": "error", "reason": "r"}', "unknown verdict"),
        ('{"verdict": 1, "reason": "r"}', "unknown verdict"),
        ('{"verdict": "consistent", "reason": "   "}', "non-empty"),
        ('{"verdict": "consistent", "reason": 5}', "non-empty"),
        ('{"verdict": "mismatch", "verdict": "consistent", "reason": "r"}', "repeats"),
        ('["consistent", "r"]', "not a JSON object"),
        ("consistent", "not a JSON object"),
        ('The answer: {"verdict": "consistent", "reason": "r"}', "not a JSON object"),
        ('{"verdict": "consistent", "reason": "r"} {"verdict": "mismatch"}', "not valid JSON"),
        ('```json\n{"verdict": "consistent", "reason": "r"}\n``` and more', "not a JSON object"),
        ('```python\n{"verdict": "consistent", "reason": "r"}\n```', "not a JSON object"),
        ("```json\n{}\n```\n```json\n{}\n```", "not valid JSON"),
        ("", "not a JSON object"),
        ("{" + " " * 70_000 + "}", "longer than"),
    ],
)
def test_anything_else_is_a_judge_error(raw: str, message: str) -> None:
    with pytest.raises(JudgeError, match=message):
        parse_answer(raw)


def test_mapping_with_extra_keys_is_an_error() -> None:
    with pytest.raises(JudgeError, match="unexpected keys: confidence"):
        parse_answer({"verdict": "consistent", "reason": "r", "confidence": 0.5})
