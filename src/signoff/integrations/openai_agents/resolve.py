"""``resolve``: apply decisions made anywhere to a paused OpenAI Agents run.

An approver decides in the inbox, the CLI, Slack… The decision is in signoff's store, not in the
SDK's ``RunState``. ``resolve`` copies it over, so ``Runner.run(agent, state)`` continues:

* approved or edited → ``state.approve(item)``. The gated tool runs the edited arguments itself,
  taken from the store;
* rejected, expired, cancelled, answered → ``state.reject(item, rejection_message=...)``, with
  the text the model reads;
* still waiting → left pending (``wait=True`` waits for it). The SDK then pauses on it again.

It never uses ``always_approve`` / ``always_reject``, since signoff decides call by call. Items
that signoff did not ask for (other tools' own approvals) are left as they are.
"""

from __future__ import annotations

from typing import Any

from agents import RunState
from agents.items import ToolApprovalItem
from pydantic_core import to_jsonable_python

from signoff.gate import Gate, messages
from signoff.gate.resumed import ambient_context, changed, local_gate
from signoff.integrations.openai_agents.tools import _object
from signoff.model import ApprovalRequest, ToolCall


def resolve(
    result_or_state: Any,
    gate: Gate | str | Any,
    *,
    thread: str | None = None,
    wait: bool = False,
    timeout: float | None = None,
) -> RunState[Any, Any]:
    """Apply signoff's decisions to the run's pending approvals and return its ``RunState``.

    ``result_or_state`` is a ``RunResult`` (its ``to_state()`` is used) or a ``RunState``,
    e.g. one restored with ``RunState.from_string`` in another process. ``gate`` is a
    :class:`~signoff.Gate` or the path of a ``signoff.yaml``. ``thread`` applies when
    the ambient ``gate.context(...)`` sets none (as for ``signoff_tools``). ``wait=True`` waits
    (at most ``timeout`` seconds per request) for decisions still missing.
    """
    gate = local_gate(gate, "resolve")
    state = _state_of(result_or_state)
    place = ambient_context(thread).thread  # read here: the gate's loop thread has no context
    gate.run_sync(_apply(gate, state, place, wait, timeout))
    return state


async def aresolve(
    result_or_state: Any,
    gate: Gate | str | Any,
    *,
    thread: str | None = None,
    wait: bool = False,
    timeout: float | None = None,
) -> RunState[Any, Any]:
    """Async twin of :func:`resolve`."""
    gate = local_gate(gate, "aresolve")
    state = _state_of(result_or_state)
    await _apply(gate, state, ambient_context(thread).thread, wait, timeout)
    return state


def _state_of(result_or_state: Any) -> RunState[Any, Any]:
    if isinstance(result_or_state, RunState):
        return result_or_state
    to_state = getattr(result_or_state, "to_state", None)
    if to_state is None:
        raise TypeError(
            "resolve takes a RunResult or a RunState (RunState.from_string(agent, saved)), "
            f"got {type(result_or_state).__name__}"
        )
    state = to_state()
    assert isinstance(state, RunState)
    return state


async def _apply(
    gate: Gate, state: RunState[Any, Any], thread: str, wait: bool, timeout: float | None
) -> None:
    await gate.ensure_writable()
    for item in state.get_interruptions():
        call_id = item.call_id
        if not call_id:
            continue
        req = await gate.store.find_request_by_call(thread, call_id)
        if req is None:
            continue  # not a call signoff asked about
        if req.call(call_id).resolution is None and wait:
            req = await gate.await_request(req.id, timeout)
        _decide(state, item, req, call_id)


def _decide(
    state: RunState[Any, Any], item: ToolApprovalItem, req: ApprovalRequest, call_id: str
) -> None:
    call = req.call(call_id)
    if call.resolution is None:
        return
    asked = req.action_request(call_id)
    args = _object(item.arguments or "")
    if item.name != asked.name or args is None or to_jsonable_python(args) != dict(asked.args):
        # The state's call is not the one reviewed: refuse it whatever was decided.
        state.reject(
            item, rejection_message=changed(ToolCall(item.name or "", args or {}, call_id))
        )
    elif call.runnable:
        state.approve(item)
    else:
        state.reject(item, rejection_message=messages.outcome_text(req, call, call_id))
