"""One flow, two drivers: the middleware's logic is written once, for sync and async agents.

A flow is a generator that *yields* what it needs done — ``Io(coro)`` (signoff's store) or
``Next(request)`` (call the next handler: the model, or the tool) — and receives the
result. The sync driver runs ``Io`` on the gate's private event loop and calls the handler
directly; the async driver awaits both. Everything else, including LangGraph's
``interrupt()``, runs inside the generator, in the node's own thread and context — which
``interrupt()`` needs (it reads the runnable config from a contextvar).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(slots=True)
class Io:
    """Await ``coro`` (a store or gate operation) and send back its result.

    ``waits``: it may wait for something outside (a human's decision), so the sync driver
    always runs it on the gate's loop thread, never inline. ``later``: nothing needs its
    result, so the sync driver may let it commit while the agent goes on, settled before
    the middleware's next store call or model step (see ``Settings.run_io``)."""

    coro: Coroutine[Any, Any, Any]
    waits: bool = False
    later: bool = False


@dataclass(slots=True)
class Next:
    """Call the next handler with ``request`` and send back its result."""

    request: Any


Effect = Io | Next
Flow = Generator[Effect, Any, T]


RunIo = Callable[[Io], Any]


def drive(flow: Flow[T], handler: Callable[[Any], Any], run_io: RunIo) -> T:
    """Run ``flow`` synchronously: ``Io`` through ``run_io``, ``Next`` through ``handler``."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            effect = flow.send(value) if error is None else flow.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            value = run_io(effect) if isinstance(effect, Io) else handler(effect.request)
        except Exception as exc:
            error = exc


async def adrive(flow: Flow[T], handler: Callable[[Any], Awaitable[Any]]) -> T:
    """Run ``flow`` in the current event loop."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            effect = flow.send(value) if error is None else flow.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            value = await (effect.coro if isinstance(effect, Io) else handler(effect.request))
        except Exception as exc:
            error = exc
