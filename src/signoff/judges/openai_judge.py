"""``kind: openai``: any OpenAI-compatible ``/chat/completions`` endpoint, through the SDK.

OpenAI, vLLM, Ollama, LiteLLM, DashScope… all speak this wire format. The answer is asked
for as structured output (``response_format`` with a strict JSON schema) and still parsed
strictly, since not every server enforces the schema. No retries: the gate applies
``on_error`` and the cache keeps good answers, so one slow endpoint never multiplies.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from typing import Any, cast

import openai
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam
from openai.types.shared_params import ResponseFormatJSONSchema

from signoff.judges.base import JudgeAnswer, JudgeError, JudgeRequest
from signoff.judges.inquiry import (
    InquiryQuestion,
    InquiryReply,
    answer_schema,
    inquiry_messages,
    parse_reply,
)
from signoff.judges.parse import parse_answer
from signoff.judges.prompt import ANSWER_SCHEMA, messages, prompt_identity
from signoff.judges.settings import OpenAIJudgeSettings
from signoff.policy.durations import format_duration

#: Sent when no key is configured (local servers): the SDK insists on one, and falling back
#: to its own OPENAI_API_KEY lookup would hand that key to whatever ``base_url`` says.
NO_KEY = "no-key"

RESPONSE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "intent_verdict",
        "strict": True,
        "schema": {k: v for k, v in ANSWER_SCHEMA.items() if k not in ("title", "description")},
    },
}


class OpenAIJudge:
    """A judge asking a chat-completions endpoint."""

    def __init__(self, name: str, settings: OpenAIJudgeSettings, *, api_key: str | None) -> None:
        self.name = name
        self.settings = settings
        self.model = settings.model
        self.timeout_s = settings.timeout
        self.cache_ttl_s = settings.cache_ttl
        self.cache_identity = f"{settings.model}/{prompt_identity(settings.prompt)}"
        self._api_key = api_key or NO_KEY
        # One client per event loop: an httpx pool belongs to the loop that opened its
        # connections, and sync callers may run each check in a fresh asyncio.run().
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncOpenAI] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        self._new_client()  # a bad setting fails when the judge is built, not on first use

    def _new_client(self) -> AsyncOpenAI:
        return AsyncOpenAI(
            base_url=self.settings.base_url,
            api_key=self._api_key,
            timeout=self.settings.timeout,
            max_retries=0,
        )

    def _client(self) -> AsyncOpenAI:
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.get(loop)
            if client is None:
                client = self._clients[loop] = self._new_client()
            return client

    async def answer(self, request: JudgeRequest) -> JudgeAnswer:
        completion = await self._complete(messages(request, self.settings.prompt), RESPONSE_FORMAT)
        return parse_answer(_content(completion))

    async def answer_inquiry(self, question: InquiryQuestion) -> InquiryReply:
        schema = {
            "type": "json_schema",
            "json_schema": {
                "name": "inquiry_answer",
                "strict": True,
                "schema": answer_schema(question),
            },
        }
        completion = await self._complete(
            inquiry_messages(question, self.settings.inquiry_prompt), schema
        )
        return parse_reply(_content(completion), question)

    async def _complete(self, prompt: Any, response_format: dict[str, Any]) -> Any:
        try:
            async with asyncio.timeout(self.timeout_s):
                return await self._client().chat.completions.create(
                    model=self.model,
                    messages=cast("list[ChatCompletionMessageParam]", prompt),
                    temperature=self.settings.temperature,
                    response_format=cast(ResponseFormatJSONSchema, response_format),
                )
        except (TimeoutError, openai.APITimeoutError):
            raise JudgeError(f"no answer within {format_duration(self.timeout_s)}") from None
        except openai.APIStatusError as exc:
            raise JudgeError(f"the judge endpoint answered HTTP {exc.status_code}") from None
        except openai.APIConnectionError:
            raise JudgeError("cannot reach the judge endpoint") from None
        except openai.OpenAIError as exc:
            raise JudgeError(f"the judge endpoint failed ({type(exc).__name__})") from None
        except Exception as exc:  # e.g. a body that is not JSON: the SDK's decoder raises
            raise JudgeError(
                f"the judge endpoint sent an unreadable response ({type(exc).__name__})"
            ) from None

    async def aclose(self) -> None:
        """Close this loop's client (clients of other loops go with their loops)."""
        with self._lock:
            client = self._clients.pop(asyncio.get_running_loop(), None)
            self._clients.clear()
        if client is not None:
            await client.close()

    def __repr__(self) -> str:
        return f"OpenAIJudge({self.name!r}, model={self.model!r})"


def _content(completion: Any) -> str:
    """The text of the first choice; JudgeError for a refusal, a cut or an empty answer."""
    try:
        choice = completion.choices[0]
        message = choice.message
        refusal = getattr(message, "refusal", None)
        content = message.content
        finish = getattr(choice, "finish_reason", None)
    except (AttributeError, IndexError, KeyError, TypeError):
        raise JudgeError("the judge endpoint sent a malformed completion") from None
    if refusal:
        raise JudgeError(f"the model refused to judge: {str(refusal)[:200]}")
    if finish == "length":
        raise JudgeError("the model's answer was cut off (finish_reason: length)")
    if not isinstance(content, str) or not content.strip():
        raise JudgeError("the model gave an empty answer")
    return content
