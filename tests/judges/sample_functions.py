"""Functions and models that ``judges:`` entries of the tests name as ``module:attr``."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from signoff.judges.base import JudgeAnswer, JudgeRequest

calls: list[dict[str, Any]] = []
NOT_A_FUNCTION = 42


def keyword_judge(request: JudgeRequest) -> dict[str, str]:
    """Sync: "mismatch" when the user asked to read and the tool deletes."""
    calls.append({"thread": threading.current_thread().name, "request": request})
    if not request.user_request:
        return {"verdict": "unclear", "reason": "no user request"}
    asked_to_read = "show" in request.user_request or "read" in request.user_request
    if asked_to_read and request.tool.startswith("delete"):
        return {"verdict": "mismatch", "reason": "the user asked to read, the call deletes"}
    return {"verdict": "consistent", "reason": "the call matches the request"}


async def async_judge(request: JudgeRequest) -> JudgeAnswer:
    await asyncio.sleep(0)
    return JudgeAnswer("consistent", f"async saw {request.tool}")


def call_ctx_judge(call: JudgeRequest, ctx: dict[str, Any]) -> dict[str, str]:
    return {"verdict": "unclear", "reason": f"ctx user_request={ctx['user_request']!r}"}


def raising_judge(request: JudgeRequest) -> dict[str, str]:
    raise RuntimeError("rules file missing")


def string_judge(request: JudgeRequest) -> str:
    return "consistent"


def extra_keys_judge(request: JudgeRequest) -> dict[str, Any]:
    return {"verdict": "consistent", "reason": "fine", "confidence": 0.9}


def unknown_verdict_judge(request: JudgeRequest) -> dict[str, str]:
    return {"verdict": "approve", "reason": "fine"}


def scripted_model() -> Any:
    """A zero-argument factory giving a chat model (LangChain's ``module:attr`` form)."""
    from langchain_core.messages import AIMessage

    from signoff.integrations.langchain.testing import ScriptedChatModel

    return ScriptedChatModel(
        script=lambda messages: AIMessage(
            content='{"verdict": "consistent", "reason": "factory model"}'
        )
    )
