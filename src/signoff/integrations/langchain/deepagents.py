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
from dataclasses import replace
from typing import Any

from signoff.gate import Gate
from signoff.integrations.langchain.middleware import SignoffMiddleware
from signoff.model import SignoffError

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

    backend = kwargs.get("backend")
    given = kwargs.pop("permissions", None)
    permissions, folded = _fold(given, backend)
    guard = _middleware(interrupt_on, signoff, folded)
    specs = [_gated(spec, guard, interrupt_on, given, backend) for spec in (subagents or [])]
    if not any(_name(spec) == GENERAL_PURPOSE_SUBAGENT["name"] for spec in specs):
        specs.insert(0, {**GENERAL_PURPOSE_SUBAGENT, "middleware": [guard]})
    return deep(
        model,
        tools,
        subagents=specs,
        middleware=[*middleware, guard],
        interrupt_on=None,
        permissions=permissions,
        **kwargs,
    )


def _fold(
    permissions: Sequence[Any] | None, backend: Any
) -> tuple[list[Any] | None, dict[str, Any]]:
    """deepagents turns ``FilesystemPermission(mode="interrupt")`` rules into a
    ``HumanInTheLoopMiddleware`` of its own. Here the same rules become signoff
    ``interrupt_on`` entries (with the very ``when`` predicates deepagents builds), and
    deepagents gets them as ``mode="allow"`` — which its FilesystemMiddleware treats exactly
    as "interrupt" (only "deny" blocks), so rule order and every deny stay as they were."""
    if not permissions or not any(rule.mode == "interrupt" for rule in permissions):
        return (list(permissions) if permissions is not None else None), {}
    try:
        from deepagents.middleware._fs_interrupt import _build_interrupt_on_from_permissions
    except ImportError as exc:  # a deepagents without that helper: refuse, never two HITLs
        raise SignoffError(
            'FilesystemPermission(mode="interrupt") needs deepagents 0.7 with signoff: this '
            "deepagents cannot say which filesystem calls the rules cover. Use mode='deny' / "
            "'allow' permissions and list the tools in interrupt_on (or a signoff policy)."
        ) from exc
    folded = dict(_build_interrupt_on_from_permissions(list(permissions), backend))
    relaxed = [replace(r, mode="allow") if r.mode == "interrupt" else r for r in permissions]
    return relaxed, folded


def _middleware(
    interrupt_on: Mapping[str, Any] | None, signoff: Signoff | None, folded: Mapping[str, Any]
) -> SignoffMiddleware:
    if interrupt_on is not None and signoff is not None:
        raise ValueError("give interrupt_on (LangChain's mapping) or signoff=, not both")
    if signoff is None:
        if interrupt_on is None and not folded:
            raise ValueError("give interrupt_on (LangChain's mapping) or signoff=")
        return SignoffMiddleware({**folded, **(interrupt_on or {})})  # user entries win
    _no_fold_into_policy(folded, given=False)
    if isinstance(signoff, SignoffMiddleware):
        return signoff
    return SignoffMiddleware(signoff)


def _no_fold_into_policy(folded: Mapping[str, Any], *, given: bool) -> None:
    """Interrupt rules become ``interrupt_on`` entries; a gate or policy file takes none."""
    if folded and not given:
        raise SignoffError(
            'FilesystemPermission(mode="interrupt") rules become interrupt_on entries, which a '
            "signoff gate or policy file does not take. Either pass interrupt_on= instead of "
            "signoff= (the rules are folded in), or write the rule in the policy (tools: "
            "write_file: rules: - when: {args.file_path: {glob: ...}} ...) and make the "
            'permission mode="allow" or "deny".'
        )


def _gated(
    spec: Any,
    guard: SignoffMiddleware,
    interrupt_on: Mapping[str, Any] | None,
    permissions: Sequence[Any] | None,
    backend: Any,
) -> Any:
    """A declarative spec gets signoff. As in deepagents, its own ``interrupt_on`` and
    ``permissions`` replace the parent's; then it gets a middleware of its own (on the
    parent's store), else the parent's."""
    if not isinstance(spec, Mapping) or "runnable" in spec or "graph_id" in spec:
        return spec  # CompiledSubAgent / AsyncSubAgent: not inherited, as in deepagents
    gated = {**spec, "interrupt_on": {}}
    chosen = guard
    if spec.get("interrupt_on") is not None or "permissions" in spec:
        own_permissions = spec.get("permissions", permissions)
        relaxed, folded = _fold(own_permissions, backend)
        gated["permissions"] = relaxed
        own = spec.get("interrupt_on")
        mapping = own if own is not None else interrupt_on
        if mapping is None and not folded:
            chosen = guard  # the parent's gate or policy file, no interrupt rules of its own
        else:
            _no_fold_into_policy(folded, given=mapping is not None)
            chosen = SignoffMiddleware({**folded, **(mapping or {})}, store=guard.gate.store)
    return {**gated, "middleware": [*spec.get("middleware", []), chosen]}


def _name(spec: Any) -> str | None:
    return spec.get("name") if isinstance(spec, Mapping) else None
