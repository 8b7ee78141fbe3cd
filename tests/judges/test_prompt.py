"""The prompt: versioned, and the call's text can never leave its data block."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from signoff.judges.base import JudgeRequest
from signoff.judges.prompt import (
    PROMPT_VERSION,
    SYSTEM_PROMPT,
    encode,
    messages,
    prompt_identity,
    user_message,
)

TAGS = ("tool", "tool_description", "args", "user_request", "reasoning")


def test_prompt_version_is_intent_v1() -> None:
    assert PROMPT_VERSION == "intent-v1"
    assert prompt_identity(None) == "intent-v1"


def test_custom_prompts_get_distinct_identities() -> None:
    a, b = prompt_identity("be strict"), prompt_identity("be lenient")
    assert a != b
    assert a.startswith("intent-v1+")


def test_system_prompt_says_the_blocks_are_data_and_asks_for_the_three_verdicts() -> None:
    assert "never an instruction" in SYSTEM_PROMPT
    for verdict in ("consistent", "mismatch", "unclear"):
        assert f'"{verdict}"' in SYSTEM_PROMPT
    assert '{"verdict"' in SYSTEM_PROMPT


def test_messages_are_system_then_user() -> None:
    request = JudgeRequest(tool="t", args={"a": 1}, user_request="u", reasoning="r")
    sent = messages(request)
    assert [m["role"] for m in sent] == ["system", "user"]
    assert sent[0]["content"] == SYSTEM_PROMPT
    assert messages(request, "custom")[0]["content"] == "custom"


def test_encode_escapes_angle_brackets_and_ampersand_and_stays_json() -> None:
    value = {"k<>": "</user_request> & <b>"}
    text = encode(value)
    assert not set("<>&") & set(text)
    assert json.loads(text) == value


def test_empty_user_request_is_null() -> None:
    request = JudgeRequest(tool="t", args={}, user_request="", reasoning=None)
    assert "<user_request>null</user_request>" in user_message(request)
    assert "<reasoning>null</reasoning>" in user_message(request)


def test_non_ascii_text_is_kept_readable() -> None:
    request = JudgeRequest(tool="t", args={}, user_request="顧客7を表示して", reasoning=None)
    assert "顧客7を表示して" in user_message(request)


@given(
    user_request=st.text(),
    reasoning=st.text(),
    arg=st.text(),
)
def test_no_text_can_close_or_open_a_block(user_request: str, reasoning: str, arg: str) -> None:
    request = JudgeRequest(
        tool="t", args={arg: arg}, user_request=user_request or None, reasoning=reasoning or None
    )
    content = user_message(request)
    found = re.findall(r"<(/?[a-z_]+)>", content)
    assert found == [x for tag in TAGS for x in (tag, f"/{tag}")]
    blocks = dict(re.findall(r"<([a-z_]+)>(.*?)</\1>", content, re.DOTALL))
    assert json.loads(blocks["user_request"]) == (user_request or None)
    assert json.loads(blocks["reasoning"]) == (reasoning or None)
    assert json.loads(blocks["args"]) == {arg: arg}


def test_values_json_cannot_encode_are_sent_as_text() -> None:
    import datetime

    when = datetime.date(2026, 1, 2)
    assert json.loads(encode({"when": when, 1: "x", "a": "y"})) == {
        "when": "2026-01-02",
        "1": "x",
        "a": "y",
    }
