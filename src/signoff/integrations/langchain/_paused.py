"""A paused step: found in the conversation, and rebuilt when the store does not know it.

In interrupt mode a step's held calls sit in the conversation as *holds* (see
:mod:`._messages`) naming their signoff request. Usually the store has that request. A
new process with the default in-memory store (or one whose store was replaced) does not:
then the request is rebuilt from what the checkpoint holds — the model's message and its
holds — and every held call is checked by the policy again before anything runs. The
checkpoint is trusted as LangChain trusts it; the policy, not the checkpoint, decides.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from signoff.gate import Gate
from signoff.integrations.langchain import _messages as msgs
from signoff.integrations.langchain._ids import scoped
from signoff.integrations.langchain._review import Where, step_context
from signoff.integrations.langchain._settings import Settings
from signoff.model import ApprovalRequest, NotFound, ToolCall, Verdict, utcnow

log = logging.getLogger("signoff.integrations.langchain")


@dataclass(frozen=True, slots=True)
class Paused:
    """Calls of the last model message held for a human decision."""

    ai: AIMessage
    holds: list[ToolMessage]
    request_id: str
    superseded: bool  # the user wrote a new message instead of deciding


@dataclass(frozen=True, slots=True)
class Rechecked:
    """A rebuilt step: the request for the calls that still need a human (None if none
    does), and each held call's verdict now, by LangChain tool-call id."""

    request: ApprovalRequest | None
    verdicts: dict[str, Verdict]


def find_paused(messages: Sequence[AnyMessage]) -> Paused | None:
    found = msgs.last_ai(messages)
    if found is None:
        return None
    index, ai = found
    after = messages[index + 1 :]
    holds = [m for m in after if isinstance(m, ToolMessage) and msgs.hold_info(m) is not None]
    if not holds:
        return None
    info = msgs.hold_info(holds[0]) or {}
    return Paused(
        ai=ai,
        holds=holds,
        request_id=info.get("request_id", ""),
        superseded=any(isinstance(m, HumanMessage) for m in after),
    )


async def stored_request(gate: Gate, request_id: str) -> ApprovalRequest | None:
    """The stored request (deadline applied if it passed while nobody looked), or None."""
    try:
        return await fresh_request(gate, request_id)
    except NotFound:
        return None


async def fresh_request(gate: Gate, request_id: str) -> ApprovalRequest:
    """The stored request, with its deadline applied if it passed while nobody looked."""
    req = await gate.get(request_id)
    if req.pending and utcnow() >= req.due_at:
        await gate.sweep()
        req = await gate.get(request_id)
    return req


async def recheck(
    s: Settings, request: ModelRequest[Any], place: Where, paused: Paused
) -> Rechecked:
    """Check the held calls again and store a request, under the checkpoint's request id,
    for those that still need a human."""
    await s.gate.ensure_writable()
    s.reviewer.register_tools(request.tools)
    ctx = step_context(s.gate, place, request.messages, paused.ai)
    by_id = {c["id"]: c for c in paused.ai.tool_calls}
    held = [by_id[h.tool_call_id] for h in paused.holds if h.tool_call_id in by_id]
    ids = [scoped(paused.ai, c["id"] or "") for c in held]
    verdicts = [
        s.reviewer.verdict(c, ctx, request, i, paused.ai) for c, i in zip(held, ids, strict=True)
    ]
    calls = [ToolCall(c["name"], c["args"], id=i) for c, i in zip(held, ids, strict=True)]
    verdicts = await s.gate.ajudge_all(calls, ctx, verdicts)
    req = None
    if any(v.needs_approval for v in verdicts):
        submission = await s.gate.asubmit_checked(
            calls, verdicts, ctx, reattach=False, request_id=paused.request_id
        )
        req = submission.request
    log.info(
        "signoff request %s was not in the store (a new process?): rebuilt from the "
        "checkpoint and checked again (%s)",
        paused.request_id,
        ", ".join(f"{c['name']}: {v.kind}" for c, v in zip(held, verdicts, strict=True)),
    )
    return Rechecked(req, {c["id"] or "": v for c, v in zip(held, verdicts, strict=True)})


def changed_calls(req: ApprovalRequest, paused: Paused) -> list[str]:
    """Held calls whose name or arguments in the conversation differ from the stored
    request's (``update_state`` on a paused thread)."""
    stored = {a.tool_call_id: a for a in req.action_requests}
    changed = []
    for call in paused.ai.tool_calls:
        action = stored.get(scoped(paused.ai, call["id"] or ""))
        if action is not None and (action.name, dict(action.args)) != (call["name"], call["args"]):
            changed.append(f"`{call['name']}` (id {call['id']})")
    return changed
