"""Resume a paused agent with the decision stored in signoff.

A request decided elsewhere — ``signoff approve``, the web inbox, Slack, a quorum of
approvers, or its deadline — is in the store, not in the graph. ``resume(agent, config)``
waits for it (push wake-up, no polling loop) and builds the ``Command(resume=...)``, so the
application never assembles decisions by hand::

    agent.invoke(resume(agent, config), config)

The middleware reads the decision from the store when the graph resumes, so the command's
value only records what was decided; ``agent.invoke(None, config)`` resumes as well.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langgraph.types import Command, Interrupt

from signoff.gate import Gate
from signoff.integrations.langchain.middleware import SignoffMiddleware
from signoff.integrations.langchain.shapes import is_signoff_interrupt
from signoff.model import ApprovalRequest, NotFound, SignoffError


class NotDecided(SignoffError):
    """The request is still pending when ``resume`` stopped waiting."""


def resume(
    agent: Any,
    config: Any,
    *,
    middleware: SignoffMiddleware | None = None,
    timeout: float | None = None,
) -> Command[Any]:
    """Wait for the pending signoff request(s) of this thread, then build the resume command.

    ``timeout`` bounds the wait (``None``: until decided or expired — every request has a
    deadline); past it :class:`NotDecided` is raised. ``middleware`` is found in ``agent``
    when not given.
    """
    interrupts = list(agent.get_state(config).interrupts)
    gate = _gate(agent, middleware)
    try:
        decided = {
            i.id: _stored_decision(gate.wait(i.value["request_id"], timeout))
            for i in _ours(interrupts)
        }
    except NotFound as exc:
        raise _unknown(exc) from None
    return _command(interrupts, decided)


async def aresume(
    agent: Any,
    config: Any,
    *,
    middleware: SignoffMiddleware | None = None,
    timeout: float | None = None,
) -> Command[Any]:
    """Async twin of :func:`resume`."""
    interrupts = list((await agent.aget_state(config)).interrupts)
    gate = _gate(agent, middleware)
    try:
        decided = {
            i.id: _stored_decision(await gate.await_request(i.value["request_id"], timeout))
            for i in _ours(interrupts)
        }
    except NotFound as exc:
        raise _unknown(exc) from None
    return _command(interrupts, decided)


def _unknown(exc: NotFound) -> SignoffError:
    return SignoffError(
        f"{exc}: this process's signoff store does not know the request (the default store "
        "lives in memory and does not survive a restart), so no decision made elsewhere can "
        "be waited for. Resume with Command(resume={'decisions': [...]}) — the request is "
        "rebuilt from the checkpoint and checked again — or give every process the same "
        "durable store (a policy file with store: sqlite:///… or postgresql://…)."
    )


def pending_request_ids(agent: Any, config: Any) -> list[str]:
    """The signoff requests this thread is paused on (for a UI or a notification)."""
    return [i.value["request_id"] for i in _ours(list(agent.get_state(config).interrupts))]


def _ours(interrupts: list[Interrupt]) -> list[Interrupt]:
    found = [i for i in interrupts if is_signoff_interrupt(i.value)]
    if not found:
        raise SignoffError("nothing to resume: this thread is not paused on a signoff request")
    return found


def _stored_decision(req: ApprovalRequest) -> dict[str, Any]:
    if req.pending:
        raise NotDecided(f"request {req.id} is still pending; nobody has decided it yet")
    latest: dict[str, dict[str, Any]] = {}
    for record in req.decisions:
        latest[record.tool_call_id] = record.model_dump(
            mode="json", include={"type", "message", "edited_action", "approver", "channel"}
        )
    for call in req.calls:
        latest.setdefault(
            call.tool_call_id, {"type": call.resolution, "approver": call.resolved_by}
        )
    return {"request_id": req.id, "status": req.status, "decisions": latest}


def _command(interrupts: list[Interrupt], decided: dict[str, dict[str, Any]]) -> Command[Any]:
    if len(interrupts) == 1:
        return Command(resume=next(iter(decided.values())))
    return Command(resume=decided)


def _gate(agent: Any, middleware: SignoffMiddleware | None) -> Gate:
    if middleware is not None:
        return middleware.gate
    found = {id(m): m for m in _middlewares(agent)}
    if not found:
        raise SignoffError(
            "no SignoffMiddleware found in this agent; pass middleware=... to resume()"
        )
    stores = {m.gate.store.url for m in found.values()}
    if len(stores) > 1:
        raise SignoffError("this agent has several signoff stores; pass middleware=... to resume()")
    return next(iter(found.values())).gate


def _middlewares(agent: Any) -> Iterator[SignoffMiddleware]:
    """SignoffMiddleware instances wired into ``create_agent``'s tools node."""
    node = getattr(agent, "nodes", {}).get("tools")
    tool_node = getattr(node, "bound", None)
    roots = [
        getattr(tool_node, "_wrap_tool_call", None),
        getattr(tool_node, "_awrap_tool_call", None),
    ]
    seen: set[int] = set()
    todo = [r for r in roots if r is not None]
    while todo:
        item = todo.pop()
        if id(item) in seen or len(seen) > 200:
            continue
        seen.add(id(item))
        owner = getattr(item, "__self__", None)
        if isinstance(owner, SignoffMiddleware):
            yield owner
        for attr in ("__wrapped__", "__func__"):
            inner = getattr(item, attr, None)
            if inner is not None:
                todo.append(inner)
        for cell in getattr(item, "__closure__", None) or ():
            try:
                content = cell.cell_contents
            except ValueError:
                continue
            if callable(content):
                todo.append(content)
