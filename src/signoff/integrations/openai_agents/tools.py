"""``signoff_tools``: the policy decides, per call, whether an OpenAI Agents tool needs approval.

Each ``FunctionTool`` is copied with two changes:

* ``needs_approval`` becomes an async callable that checks the call against the policy. A call
  that needs a human gets its approval request stored (and approvers notified) there, and the
  SDK pauses the run on it. Allowed and denied calls go on to the invoker.
* ``on_invoke_tool`` runs a call only as signoff's store allows. An allowed call runs. A denied
  call returns the denial as the tool's output. A call the SDK says was approved runs only if
  signoff's store says so too, with the arguments the approver settled on (an edit), claimed
  once on the exactly-once ledger. The serialized ``RunState`` is not authenticated.

The SDK's approval item carries no metadata, so a request is keyed on the SDK's ``call_id``
plus the thread: the ``gate.context(thread=...)`` around the run (and around ``resolve``), else
the ``thread`` given here.

In blocking mode (``blocking=True``, for servers) nothing pauses: the invoker asks and waits
for the decision inside the run.
"""

from __future__ import annotations

import copy
import json
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from agents import FunctionTool, RunContextWrapper
from agents.tool_context import ToolContext

from signoff.gate import Gate, messages
from signoff.gate.resumed import (
    Ran,
    ambient_context,
    ask,
    local_gate,
    run_resumed,
    with_edit_notice,
)
from signoff.model import IdempotencyConflict, ToolCall, Verdict

_REMEMBERED = 10_000
log = logging.getLogger("signoff.openai_agents")


def signoff_tools(
    gate_or_config: Gate | str | Any,
    tools: Sequence[Any],
    *,
    blocking: bool = False,
    thread: str | None = None,
    agent: str | None = None,
) -> list[FunctionTool]:
    """Copies of ``tools`` gated by signoff's policy (the originals are left as they are).

    ``gate_or_config`` is a :class:`~signoff.Gate` or the path of a ``signoff.yaml``. The
    policy replaces each tool's own ``needs_approval``. ``thread`` and ``agent`` apply when the
    ambient ``gate.context(...)`` sets none. ``blocking=True`` waits for decisions inside the
    run instead of pausing it.
    """
    gate = local_gate(gate_or_config, "signoff_tools")
    verdicts = _Verdicts()
    gated = [_gated(gate, tool, verdicts, blocking, thread, agent) for tool in tools]
    if blocking:
        for tool in gated:
            _warn_if_the_sdk_gives_up_first(gate, tool)
    return gated


def _warn_if_the_sdk_gives_up_first(gate: Gate, tool: FunctionTool) -> None:
    """In blocking mode the tool waits for a human: a ``timeout_seconds`` shorter than the
    request's deadline ends the wait early (the outer tier must be the longer one)."""
    limit = tool.timeout_seconds
    deadlines = [
        o.spec.timeout_s * (2 if o.spec.on_timeout == "escalate" else 1)
        for o in gate.policy.outcomes_for(tool.name)
        if o.kind == "require_approval"
    ]
    if limit is not None and deadlines and limit <= max(deadlines):
        log.warning(
            "tool %s has timeout_seconds=%g but may wait %.0f s for a human (the policy's "
            "timeout): the SDK gives up on the wait first; raise timeout_seconds above it or "
            "shorten the policy's timeout",
            tool.name,
            limit,
            max(deadlines),
        )


class _Verdicts:
    """Verdicts from ``needs_approval`` for the invoker that follows (bounded; a restarted
    process has none and checks again)."""

    def __init__(self) -> None:
        self._items: OrderedDict[tuple[str, str], tuple[Mapping[str, Any], Verdict | str]] = (
            OrderedDict()
        )

    def keep(self, call: ToolCall, thread: str, verdict: Verdict | str) -> None:
        """``verdict``: the policy's, or the text of a refusal that needs no human."""
        self._items[(thread, call.id)] = (call.args, verdict)
        if len(self._items) > _REMEMBERED:
            self._items.popitem(last=False)

    def take(self, call: ToolCall, thread: str) -> Verdict | str | None:
        found = self._items.pop((thread, call.id), None)
        return found[1] if found is not None and found[0] == call.args else None


def _gated(
    gate: Gate,
    tool: Any,
    verdicts: _Verdicts,
    blocking: bool,
    thread: str | None,
    agent: str | None,
) -> FunctionTool:
    if not isinstance(tool, FunctionTool):
        raise TypeError(
            f"signoff_tools gates FunctionTools; {getattr(tool, 'name', tool)!r} is a "
            f"{type(tool).__name__}. Give it its own needs_approval, or leave it out."
        )
    name = tool.name
    gated = copy.copy(tool)  # the SDK's own copy: rebinds its invoker to the copy
    inner = gated.on_invoke_tool

    async def needs_approval(
        run: RunContextWrapper[Any], params: dict[str, Any], call_id: str
    ) -> bool:
        call = ToolCall(name, params, id=call_id)
        ctx = ambient_context(thread, agent, user_request(run.turn_input))
        try:
            verdict, _request = await ask(gate, call, ctx)
        except IdempotencyConflict as exc:  # a reused call id: the invoker says why
            verdicts.keep(call, ctx.thread, reused_id(call, exc))
            return False
        verdicts.keep(call, ctx.thread, verdict)
        return verdict.needs_approval

    async def invoke(tool_ctx: ToolContext[Any], arguments: str) -> Any:
        args = _object(arguments)
        if args is None:
            return (
                f"The arguments for `{name}` are not a JSON object, so signoff could not check "
                "them; the tool was not executed. Call it again with a JSON object."
            )
        call = ToolCall(name, args, id=tool_ctx.tool_call_id)
        ctx = ambient_context(thread, agent, user_request(tool_ctx.turn_input))
        verdict = verdicts.take(call, ctx.thread)
        if isinstance(verdict, str):
            return verdict
        if verdict is not None and verdict.denied:
            return messages.denied(name, verdict)
        if verdict is not None and verdict.allowed:
            result = await inner(tool_ctx, arguments)
            gate.record_execution(call, ctx)
            return result

        async def run(final: Mapping[str, Any]) -> Any:
            return await inner(tool_ctx, arguments if final is args else json.dumps(final))

        outcome = await run_resumed(gate, call, ctx, run, wait=blocking, verdict=verdict)
        return with_edit_notice(outcome, name) if isinstance(outcome, Ran) else outcome.text

    gated.needs_approval = False if blocking else needs_approval
    gated.on_invoke_tool = invoke
    return gated


def reused_id(call: ToolCall, exc: IdempotencyConflict) -> str:
    return (
        f"The tool call `{call.name}` reuses the id {call.id} of an earlier call on this thread "
        f"with other arguments ({exc}), so it was not executed. signoff keys approvals on "
        "(thread, call id): give each call its own id, or each conversation its own thread."
    )


def user_request(items: list[Any]) -> str | None:
    """The text of the turn's last user message, shown to approvers."""
    for item in reversed(items):
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                texts = [p.get("text") for p in content if isinstance(p, dict)]
                return "\n".join(t for t in texts if isinstance(t, str)) or None
    return None


def _object(arguments: str) -> dict[str, Any] | None:
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None
