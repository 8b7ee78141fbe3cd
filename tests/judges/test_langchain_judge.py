"""kind: langchain — a chat model is the judge (ScriptedChatModel, no network)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from signoff.integrations.langchain.testing import ScriptedChatModel
from signoff.judges.base import JudgeError, JudgeRequest
from signoff.judges.langchain_judge import LangChainJudge, chat_model
from signoff.judges.prompt import SYSTEM_PROMPT
from signoff.judges.settings import LangChainJudgeSettings, build_judges

REQUEST = JudgeRequest(
    tool="send_email", args={"to": "bob@example.com"}, user_request="email bob", reasoning="asked"
)
SETTINGS = LangChainJudgeSettings(kind="langchain", model="x:model")


def judge_replying(reply: AIMessage | Exception, seen: list[Any] | None = None) -> LangChainJudge:
    def script(messages: Sequence[BaseMessage]) -> AIMessage:
        if seen is not None:
            seen.append(list(messages))
        if isinstance(reply, Exception):
            raise reply
        return reply

    return LangChainJudge("chat", SETTINGS, ScriptedChatModel(script=script))


@pytest.mark.parametrize("verdict", ["consistent", "mismatch", "unclear"])
async def test_json_text_answer_is_parsed(verdict: str) -> None:
    text = json.dumps({"verdict": verdict, "reason": "r"})
    answer = await judge_replying(AIMessage(content=text)).answer(REQUEST)
    assert (answer.verdict, answer.reason) == (verdict, "r")


async def test_model_gets_the_system_prompt_and_the_data_blocks() -> None:
    seen: list[Any] = []
    reply = AIMessage(content='{"verdict": "consistent", "reason": "r"}')
    await judge_replying(reply, seen).answer(REQUEST)
    [[system, human]] = seen
    assert isinstance(system, SystemMessage) and system.content == SYSTEM_PROMPT
    assert isinstance(human, HumanMessage)
    assert '<user_request>"email bob"</user_request>' in str(human.content)
    assert '<args>{"to": "bob@example.com"}</args>' in str(human.content)


async def test_structured_output_as_a_tool_call_is_used() -> None:
    reply = AIMessage(
        content="",
        tool_calls=[
            {
                "name": "intent_verdict",
                "args": {"verdict": "mismatch", "reason": "other recipient"},
                "id": "c1",
                "type": "tool_call",
            }
        ],
    )
    answer = await judge_replying(reply).answer(REQUEST)
    assert (answer.verdict, answer.reason) == ("mismatch", "other recipient")


async def test_structured_output_with_extra_keys_is_an_error() -> None:
    reply = AIMessage(
        content="",
        tool_calls=[
            {
                "name": "intent_verdict",
                "args": {"verdict": "consistent", "reason": "r", "also": "x"},
                "id": "c1",
                "type": "tool_call",
            }
        ],
    )
    with pytest.raises(JudgeError, match="unexpected keys: also"):
        await judge_replying(reply).answer(REQUEST)


async def test_fenced_json_text_is_accepted() -> None:
    reply = AIMessage(content='```json\n{"verdict": "unclear", "reason": "r"}\n```')
    assert (await judge_replying(reply).answer(REQUEST)).verdict == "unclear"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("Looks consistent to me.", "not a JSON object"),
        ('{"verdict": "yes", "reason": "r"}', "unknown verdict"),
        ('{"verdict": "consistent", "reason": "r", "x": 1}', "unexpected keys"),
    ],
)
async def test_malformed_text_answer_is_an_error(content: str, message: str) -> None:
    with pytest.raises(JudgeError, match=message):
        await judge_replying(AIMessage(content=content)).answer(REQUEST)


async def test_content_blocks_are_read_as_text() -> None:
    reply = AIMessage(
        content=[{"type": "text", "text": '{"verdict": "consistent", "reason": "r"}'}]
    )
    assert (await judge_replying(reply).answer(REQUEST)).verdict == "consistent"


async def test_failing_model_is_a_judge_error() -> None:
    with pytest.raises(JudgeError, match="the chat model failed"):
        await judge_replying(RuntimeError("rate limited")).answer(REQUEST)


async def test_model_without_structured_output_falls_back_to_text() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    model = FakeListChatModel(responses=['{"verdict": "mismatch", "reason": "plain"}'])
    judge = LangChainJudge("chat", SETTINGS, model)
    assert judge._structured is None
    assert (await judge.answer(REQUEST)).reason == "plain"


def test_chat_model_accepts_a_model_or_a_factory_and_refuses_anything_else() -> None:
    model = ScriptedChatModel(script=lambda m: AIMessage(content=""))
    assert chat_model(model) is model
    assert chat_model(lambda: model) is model
    with pytest.raises(TypeError, match="LangChain chat model"):
        chat_model(42)
    with pytest.raises(TypeError, match="LangChain chat model"):
        chat_model(lambda: "not a model")


async def test_built_from_settings_with_a_factory_reference() -> None:
    judge = build_judges(
        {"chat": {"kind": "langchain", "model": "tests.judges.sample_functions:scripted_model"}}
    )["chat"]
    assert (
        judge.cache_identity == "langchain:tests.judges.sample_functions:scripted_model/intent-v1"
    )
    assert (await judge.answer(REQUEST)).reason == "factory model"
