"""The ambient call context: who the agent acts for, on which thread, and why."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any

from signoff.model import CallContext, Principal

_DEFAULT = CallContext()  # frozen: safe to share as the ContextVar default
_current: contextvars.ContextVar[CallContext] = contextvars.ContextVar(
    "signoff_call_context", default=_DEFAULT
)


def current_context() -> CallContext:
    """The context set by the innermost ``gate.context(...)`` block (or the empty default)."""
    return _current.get()


@contextmanager
def use_context(ctx: CallContext) -> Iterator[CallContext]:
    token = _current.set(ctx)
    try:
        yield ctx
    finally:
        _current.reset(token)


def merged_context(
    base: CallContext,
    principal: Principal | None,
    *,
    thread: str | None = None,
    agent: str | None = None,
    environment: str | None = None,
    time: datetime | None = None,
    user_request: str | None = None,
    reasoning: str | None = None,
    attrs: Mapping[str, Any] | None = None,
) -> CallContext:
    """``base`` with the given fields replaced; ``attrs`` are merged, not replaced."""
    changes: dict[str, Any] = {}
    if principal is not None:
        changes["principal"] = principal
    for key, value in (
        ("thread", thread),
        ("agent", agent),
        ("environment", environment),
        ("time", time),
        ("user_request", user_request),
        ("reasoning", reasoning),
    ):
        if value is not None:
            changes[key] = value
    if attrs:
        changes["attrs"] = {**base.attrs, **attrs}
    return replace(base, **changes) if changes else base
