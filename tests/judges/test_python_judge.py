"""kind: python — a function of yours is the judge, sync (in a thread) or async."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from signoff.judges.base import JudgeError, JudgeRequest
from signoff.judges.python_judge import PythonJudge
from signoff.judges.settings import PythonJudgeSettings, build_judges
from tests.judges import sample_functions

READ = JudgeRequest(
    tool="delete_record", args={"id": 7}, user_request="show record 7", reasoning=None
)
MODULE = "tests.judges.sample_functions"


def judge_for(attr: str, **extra: Any) -> PythonJudge:
    built = build_judges({"local": {"kind": "python", "function": f"{MODULE}:{attr}", **extra}})
    judge = built["local"]
    assert isinstance(judge, PythonJudge)
    return judge


async def test_sync_function_answers_from_a_worker_thread() -> None:
    sample_functions.calls.clear()
    answer = await judge_for("keyword_judge").answer(READ)
    assert (answer.verdict, answer.reason) == (
        "mismatch",
        "the user asked to read, the call deletes",
    )
    [call] = sample_functions.calls
    assert call["thread"] != threading.current_thread().name
    assert call["request"] is READ


async def test_sync_function_without_user_request_can_say_unclear() -> None:
    request = JudgeRequest(tool="t", args={}, user_request=None, reasoning=None)
    assert (await judge_for("keyword_judge").answer(request)).verdict == "unclear"


async def test_async_function_is_awaited_and_may_return_a_judge_answer() -> None:
    answer = await judge_for("async_judge").answer(READ)
    assert (answer.verdict, answer.reason) == ("consistent", "async saw delete_record")


async def test_two_parameter_function_gets_call_and_ctx() -> None:
    answer = await judge_for("call_ctx_judge").answer(READ)
    assert answer.reason == "ctx user_request='show record 7'"


async def test_raising_function_is_a_judge_error_naming_it() -> None:
    with pytest.raises(JudgeError, match=r"raising_judge raised RuntimeError: rules file missing"):
        await judge_for("raising_judge").answer(READ)


@pytest.mark.parametrize(
    ("attr", "message"),
    [
        ("string_judge", "returned str; expected a mapping"),
        ("extra_keys_judge", "unexpected keys: confidence"),
        ("unknown_verdict_judge", "unknown verdict 'approve'"),
    ],
)
async def test_bad_return_is_a_judge_error(attr: str, message: str) -> None:
    with pytest.raises(JudgeError, match=message):
        await judge_for(attr).answer(READ)


async def test_slow_async_function_times_out() -> None:
    never = asyncio.Event()

    async def waits(request: JudgeRequest) -> dict[str, str]:
        await never.wait()
        return {"verdict": "consistent", "reason": "late"}

    judge = PythonJudge(
        "slow", PythonJudgeSettings(kind="python", function="x:waits", timeout=0.05), waits
    )
    with pytest.raises(JudgeError, match="no answer within"):
        await judge.answer(READ)


async def test_sync_function_does_not_block_the_event_loop() -> None:
    go = threading.Event()

    def waits_for_the_loop(request: JudgeRequest) -> dict[str, str]:
        # Released by a coroutine: only possible while the loop keeps running.
        released = go.wait(timeout=10)
        return {"verdict": "consistent", "reason": "released" if released else "blocked"}

    judge = PythonJudge(
        "sync", PythonJudgeSettings(kind="python", function="x:waits"), waits_for_the_loop
    )
    task = asyncio.create_task(judge.answer(READ))
    await asyncio.sleep(0)
    go.set()
    assert (await task).reason == "released"


async def test_cache_identity_names_the_function() -> None:
    judge = judge_for("keyword_judge", cache_ttl="1m")
    assert judge.cache_identity == f"python:{MODULE}:keyword_judge"
    assert judge.cache_ttl_s == 60.0
    await judge.aclose()
