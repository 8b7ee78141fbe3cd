"""``run_inline``: a coroutine that never waits runs on the caller's thread, without a loop."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from signoff._loopthread import Suspended, run_inline

_seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


async def _answer(value: int) -> tuple[int, str]:
    await asyncio.sleep(0)  # a bare yield: stepped over
    return value, threading.current_thread().name


async def _fails() -> None:
    raise KeyError("boom")


def test_a_coroutine_that_never_waits_runs_on_the_callers_thread() -> None:
    assert run_inline(_answer(7)) == (7, threading.current_thread().name)


def test_its_exception_reaches_the_caller() -> None:
    with pytest.raises(KeyError, match="boom"):
        run_inline(_fails())


def test_a_coroutine_that_waits_is_closed_and_refused() -> None:
    loop = asyncio.new_event_loop()
    finished: list[bool] = []

    async def waits() -> None:
        try:
            await loop.create_future()  # a future of another (not running) loop
        finally:
            finished.append(True)

    try:
        with pytest.raises(Suspended, match="waited on Future"):
            run_inline(waits())
    finally:
        loop.close()
    assert finished == [True]  # closed: its cleanup ran, nothing left half-done


def test_context_changes_stay_inside() -> None:
    async def sets() -> str:
        _seen.set("inside")
        return _seen.get()

    assert run_inline(sets()) == "inside"
    assert _seen.get() == "unset"


async def test_refused_on_a_thread_whose_loop_is_running() -> None:
    with pytest.raises(Suspended, match="running event loop"):
        run_inline(_answer(1))
