"""``kind: python``: a function of yours is the judge (rules, a keyword list, a local model).

The function is called with the :class:`~signoff.judges.base.JudgeRequest` —
``function(request)`` — or, if it takes two positional parameters, as
``function(call, ctx)`` with ``call`` the request and ``ctx`` a mapping of the untrusted
context (``user_request``, ``reasoning``). It returns ``{"verdict", "reason"}`` (or a
:class:`~signoff.judges.base.JudgeAnswer`). An ``async def`` is awaited; a plain function
runs in a worker thread, so a slow one cannot block the event loop. Past ``timeout`` the
gate stops waiting (a thread cannot be stopped; it finishes on its own).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from signoff.judges.base import JudgeAnswer, JudgeError, JudgeRequest
from signoff.judges.inquiry import InquiryQuestion, InquiryReply, parse_reply
from signoff.judges.parse import parse_answer
from signoff.judges.settings import PythonJudgeSettings
from signoff.policy.durations import format_duration


class PythonJudge:
    """A judge that is a Python function."""

    def __init__(
        self,
        name: str,
        settings: PythonJudgeSettings,
        function: Callable[..., Any],
        inquiry_function: Callable[..., Any] | None = None,
    ) -> None:
        self.name = name
        self.settings = settings
        self.function = function
        self.timeout_s = settings.timeout
        self.cache_ttl_s = settings.cache_ttl
        self.cache_identity = f"python:{settings.function}"
        self._is_async = _is_async(function)
        self._two_args = _takes_two(function)
        self.inquiry_function = inquiry_function or function
        self._inquiry_ref = settings.inquiry_function or settings.function

    async def answer(self, request: JudgeRequest) -> JudgeAnswer:
        args: tuple[Any, ...] = (request,)
        if self._two_args:
            args = (request, {"user_request": request.user_request, "reasoning": request.reasoning})
        result = await self._call(self.function, args, self.settings.function)
        return _answer(result, self.settings.function)

    async def answer_inquiry(self, question: InquiryQuestion) -> InquiryReply:
        """``inquiry_function(inquiry, ctx)`` (or ``function``) returns the answer: a string,
        ``{"answer": ...}``, or for a form ``{"answers": {id: ...}}``; None is no answer."""
        fn = self.inquiry_function
        ctx = {
            "user_request": question.user_request,
            "reasoning": question.reasoning,
            **question.context,
        }
        args: tuple[Any, ...] = (question, ctx) if _takes_two(fn) else (question,)
        result = await self._call(fn, args, self._inquiry_ref)
        if isinstance(result, InquiryReply):
            return result
        if result is not None and not isinstance(result, str | Mapping):
            raise JudgeError(
                f"{self._inquiry_ref} returned {type(result).__name__}; expected a string or "
                '{"answer": ...} / {"answers": {...}}'
            )
        return parse_reply(result, question, plain_text=True)

    async def _call(self, fn: Callable[..., Any], args: tuple[Any, ...], ref: str) -> Any:
        try:
            async with asyncio.timeout(self.timeout_s):
                if _is_async(fn):
                    return await fn(*args)
                result = await asyncio.to_thread(fn, *args)
                if inspect.isawaitable(result):
                    result = await result
                return result
        except TimeoutError:
            raise JudgeError(f"no answer within {format_duration(self.timeout_s)}") from None
        except JudgeError:
            raise
        except Exception as exc:
            detail = str(exc)[:200]
            raise JudgeError(
                f"{ref} raised {type(exc).__name__}" + (f": {detail}" if detail else "")
            ) from None

    async def aclose(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"PythonJudge({self.name!r}, function={self.settings.function!r})"


def _answer(result: object, ref: str) -> JudgeAnswer:
    if isinstance(result, JudgeAnswer):
        result = {"verdict": result.verdict, "reason": result.reason}
    if not isinstance(result, Mapping):
        raise JudgeError(
            f"{ref} returned {type(result).__name__}; expected a mapping "
            '{"verdict": ..., "reason": ...}'
        )
    return parse_answer(result)


def _is_async(function: Callable[..., Any]) -> bool:
    call = getattr(function, "__call__", None)  # noqa: B004 - an object with async __call__
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(call)


def _takes_two(function: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return True
    return len(positional) >= 2
