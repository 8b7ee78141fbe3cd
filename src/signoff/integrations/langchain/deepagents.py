"""``create_deep_agent`` with signoff instead of LangChain's ``HumanInTheLoopMiddleware``.

deepagents turns ``interrupt_on`` into a ``HumanInTheLoopMiddleware`` for the main agent
and for every declarative subagent (the built-in general-purpose one included). This
wrapper keeps that meaning and puts a :class:`SignoffMiddleware` in each of those places
instead — one import changes::

    from signoff.integrations.langchain.deepagents import create_deep_agent

    agent = create_deep_agent(model, tools, interrupt_on={"delete_file": True},
                              checkpointer=InMemorySaver())

A subagent's approval pauses the whole agent (LangGraph propagates the interrupt), and
``Command(resume=...)`` or :func:`~signoff.integrations.langchain.resume` continues it, as
with deepagents' own middleware. Like deepagents, a subagent spec with its own
``interrupt_on`` uses that instead (with the same store), and compiled or remote
subagents are left alone: they bring their own approval setup.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from signoff.gate import Gate
from signoff.integrations.langchain.middleware import SignoffMiddleware

Signoff = SignoffMiddleware | Gate | str | os.PathLike[str]


def create_deep_agent(
    model: Any = None,
    tools: Sequence[Any] | None = None,
    *,
    interrupt_on: Mapping[str, Any] | None = None,
    signoff: Signoff | None = None,
    subagents: Sequence[Any] | None = None,
    middleware: Sequence[Any] = (),
    **kwargs: Any,
) -> Any:
    """``deepagents.create_deep_agent`` gated by signoff (main agent and subagents).

    Give LangChain's ``interrupt_on`` mapping, or ``signoff=``: a ready
    :class:`SignoffMiddleware`, a :class:`~signoff.Gate` or a policy file path. Every other
    argument goes to deepagents unchanged.
    """
    from deepagents import create_deep_agent as deep
    from deepagents.middleware.subagents import GENERAL_PURPOSE_SUBAGENT

    guard = _middleware(interrupt_on, signoff)
    specs = [_gated(spec, guard) for spec in (subagents or [])]
    if not any(_name(spec) == GENERAL_PURPOSE_SUBAGENT["name"] for spec in specs):
        specs.insert(0, {**GENERAL_PURPOSE_SUBAGENT, "middleware": [guard]})
    return deep(
        model,
        tools,
        subagents=specs,
        middleware=[*middleware, guard],
        interrupt_on=None,
        **kwargs,
    )


def _middleware(
    interrupt_on: Mapping[str, Any] | None, signoff: Signoff | None
) -> SignoffMiddleware:
    if (interrupt_on is None) == (signoff is None):
        raise ValueError("give interrupt_on (LangChain's mapping) or signoff=, not both")
    if isinstance(signoff, SignoffMiddleware):
        return signoff
    return SignoffMiddleware(interrupt_on if interrupt_on is not None else signoff)


def _gated(spec: Any, guard: SignoffMiddleware) -> Any:
    """A declarative spec gets signoff (its own ``interrupt_on`` wins, as in deepagents)."""
    if not isinstance(spec, Mapping) or "runnable" in spec or "graph_id" in spec:
        return spec  # CompiledSubAgent / AsyncSubAgent: not inherited, as in deepagents
    own = spec.get("interrupt_on")
    chosen = guard if own is None else SignoffMiddleware(own, store=guard.gate.store)
    return {**spec, "interrupt_on": {}, "middleware": [*spec.get("middleware", []), chosen]}


def _name(spec: Any) -> str | None:
    return spec.get("name") if isinstance(spec, Mapping) else None
