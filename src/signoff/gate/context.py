"""The ambient call context: who the agent acts for, on which thread, and why."""

from __future__ import annotations

import contextvars
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
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


class ContextMethods:
    """``context()`` / ``make_context()`` for the local and the remote gate alike.

    Subclasses say only how a principal's roles are found (:meth:`_principal`).
    """

    def _principal(self, id: str, roles: Iterable[str]) -> Principal:
        return Principal(id, frozenset(roles))

    def context(
        self,
        principal: str | Principal | None = None,
        *,
        roles: Iterable[str] | None = None,
        thread: str | None = None,
        agent: str | None = None,
        environment: str | None = None,
        user_request: str | None = None,
        reasoning: str | None = None,
        time: datetime | None = None,
        **attrs: Any,
    ) -> AbstractContextManager[CallContext]:
        """Set who calls, on which thread, and why, for the calls made inside the block."""
        return use_context(
            self.make_context(
                principal,
                roles=roles,
                thread=thread,
                agent=agent,
                environment=environment,
                user_request=user_request,
                reasoning=reasoning,
                time=time,
                **attrs,
            )
        )

    def make_context(
        self,
        principal: str | Principal | None = None,
        *,
        roles: Iterable[str] | None = None,
        base: CallContext | None = None,
        thread: str | None = None,
        agent: str | None = None,
        environment: str | None = None,
        user_request: str | None = None,
        reasoning: str | None = None,
        time: datetime | None = None,
        **attrs: Any,
    ) -> CallContext:
        """A :class:`CallContext` on top of ``base`` (default: the current one)."""
        who: Principal | None
        if isinstance(principal, Principal):
            who = self._principal(principal.id, principal.roles)
        elif principal is not None:
            who = self._principal(principal, roles or ())
        else:
            who = None
        return merged_context(
            base if base is not None else current_context(),
            who,
            thread=thread,
            agent=agent,
            environment=environment,
            time=time,
            user_request=user_request,
            reasoning=reasoning,
            attrs=attrs,
        )
