"""``kind: langchain``: any LangChain chat model is the judge (``module:attr``).

The model is asked for structured output (``with_structured_output(schema,
method="json_schema")``) where it supports it; when it gives no structured result (a model
without native structured output, or one that answered in plain text) its text content is
parsed, as strictly as every other answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

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
from signoff.judges.settings import LangChainJudgeSettings
from signoff.policy.durations import format_duration


def chat_model(target: Any) -> Any:
    """``target`` if it is a chat model, else what calling it (no arguments) returns."""
    if not _is_chat_model(target) and callable(target):
        target = target()
    if not _is_chat_model(target):
        raise TypeError(
            f"expected a LangChain chat model (BaseChatModel) or a function returning one, "
            f"got {type(target).__name__}"
        )
    return target


def _is_chat_model(value: Any) -> bool:
    return not isinstance(value, type) and callable(getattr(value, "ainvoke", None))


class LangChainJudge:
    """A judge that is a LangChain chat model."""

    def __init__(self, name: str, settings: LangChainJudgeSettings, model: Any) -> None:
        self.name = name
        self.settings = settings
        self.model = model
        self.timeout_s = settings.timeout
        self.cache_ttl_s = settings.cache_ttl
        self.cache_identity = f"langchain:{settings.model}/{prompt_identity(settings.prompt)}"
        self._structured = _structured(model)

    async def answer(self, request: JudgeRequest) -> JudgeAnswer:
        prompt = [dict(m) for m in messages(request, self.settings.prompt)]
        try:
            async with asyncio.timeout(self.timeout_s):
                if self._structured is not None:
                    out = await self._structured.ainvoke(prompt)
                else:
                    out = {"raw": await self.model.ainvoke(prompt), "parsed": None}
        except TimeoutError:
            raise JudgeError(f"no answer within {format_duration(self.timeout_s)}") from None
        except Exception as exc:
            raise JudgeError(f"the chat model failed ({type(exc).__name__})") from None
        if not isinstance(out, Mapping):  # not include_raw's shape: a model of its own kind
            return parse_answer(out if isinstance(out, str | Mapping) else _text(out))
        parsed = out.get("parsed")
        if isinstance(parsed, Mapping):
            return parse_answer(parsed)
        return parse_answer(_text(out.get("raw")))

    async def answer_inquiry(self, question: InquiryQuestion) -> InquiryReply:
        prompt = [dict(m) for m in inquiry_messages(question, self.settings.inquiry_prompt)]
        schema = {"title": "inquiry_answer", **answer_schema(question)}
        structured = _structured(self.model, schema)
        try:
            async with asyncio.timeout(self.timeout_s):
                if structured is not None:
                    out = await structured.ainvoke(prompt)
                else:
                    out = {"raw": await self.model.ainvoke(prompt), "parsed": None}
        except TimeoutError:
            raise JudgeError(f"no answer within {format_duration(self.timeout_s)}") from None
        except Exception as exc:
            raise JudgeError(f"the chat model failed ({type(exc).__name__})") from None
        if not isinstance(out, Mapping):
            return parse_reply(out if isinstance(out, str | Mapping) else _text(out), question)
        parsed = out.get("parsed")
        if isinstance(parsed, Mapping):
            return parse_reply(parsed, question)
        return parse_reply(_text(out.get("raw")), question)

    async def aclose(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"LangChainJudge({self.name!r}, model={self.settings.model!r})"


def _structured(model: Any, schema: dict[str, Any] = ANSWER_SCHEMA) -> Any:
    """The model with structured output and the raw message kept, or None if unsupported."""
    try:
        return model.with_structured_output(schema, method="json_schema", include_raw=True)
    except (AttributeError, NotImplementedError, TypeError, ValueError):
        return None


def _text(message: Any) -> str:
    """A message's text content (string content, or the text parts of a content list)."""
    content = getattr(message, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p if isinstance(p, str) else p.get("text", "")
            for p in content
            if isinstance(p, str) or (isinstance(p, Mapping) and p.get("type") == "text")
        ]
        return "".join(parts)
    raise JudgeError("the chat model gave no text answer")
