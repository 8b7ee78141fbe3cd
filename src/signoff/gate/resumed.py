"""Running a call that an agent framework paused for approval, when the framework resumes it.

Some frameworks pause a run for approval themselves and let the application hand the answer
back as data: the OpenAI Agents SDK's serialized ``RunState``, Pydantic AI's
``DeferredToolResults``. Nobody authenticates that data, so it is never the authority. Before a
paused call runs, signoff's store must agree. The call must be in a request for
(thread, call id), with the arguments the approver saw, approved or edited. It is then claimed
on the exactly-once ledger. A call the store does not know is checked again. If it needs a
human, it runs only after a human approves it (``wait=True``), or it never runs (fail closed).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_jsonable_python

from signoff.gate import messages
from signoff.gate.context import current_context, merged_context
from signoff.gate.core import Gate
from signoff.gate.decisions import request_context
from signoff.model import (
    AlreadyExecuted,
    ApprovalRequest,
    CallContext,
    SignoffError,
    ToolCall,
    Verdict,
)
from signoff.policy.redact import mask, merge_edit

DEFAULT_THREAD = CallContext().thread

Run = Callable[[Mapping[str, Any]], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Ran:
    """The tool ran. ``edited`` holds the arguments it ran with if a reviewer changed them
    (secret-named values masked: the texts a model reads never repeat a secret)."""

    result: Any
    edited: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Refused:
    """The tool did not run; ``text`` tells the model why (denied, rejected, still waiting…)."""

    text: str


Outcome = Ran | Refused


async def ask(
    gate: Gate, call: ToolCall, ctx: CallContext
) -> tuple[Verdict, ApprovalRequest | None]:
    """Check ``call``; if it needs a human, store its request (see :func:`submit`)."""
    verdict = await gate.acheck(call, ctx)
    if not verdict.needs_approval:
        return verdict, None
    return verdict, await submit(gate, call, verdict, ctx)


async def submit(gate: Gate, call: ToolCall, verdict: Verdict, ctx: CallContext) -> ApprovalRequest:
    """Store the request for a call needing a human, once per (thread, call id).

    The framework keeps the pause (its state holds the call id), so no re-attaching to an
    older request by arguments: the same id finds the same request.
    """
    submission = await gate.asubmit_checked([call], [verdict], ctx, reattach=False)
    assert submission.request is not None  # a verdict needing approval always stores one
    return submission.request


async def run_resumed(
    gate: Gate,
    call: ToolCall,
    ctx: CallContext,
    run: Run,
    *,
    wait: bool,
    verdict: Verdict | None = None,
) -> Outcome:
    """Run ``call`` only as signoff's store allows; an approved call exactly once.

    ``run`` gets the arguments to run with: ``call.args`` itself when they are the approved
    ones, else the edited arguments (JSON values, secrets restored from ``call.args``).
    ``verdict`` is the policy's answer when the caller already has it (not audited again).
    ``wait`` blocks until a human decides instead of refusing a call still waiting.
    """
    await gate.ensure_writable()
    req = await gate.store.find_request_by_call(ctx.thread, call.id)
    call_id = call.id
    if req is None:
        verdict = verdict if verdict is not None else await gate.acheck(call, ctx)
        if verdict.denied:
            return Refused(messages.denied(call.name, verdict))
        if verdict.allowed:
            result = await run(call.args)
            gate.record_execution(call, ctx)
            return Ran(result)
        if not wait:
            return Refused(unreviewed(call))
        submission = await gate.asubmit_checked([call], [verdict], ctx)
        assert submission.request is not None  # a verdict needing approval always stores one
        req, call_id = submission.request, submission.stored_id(call.id)
    elif req.call(call_id).resolution is None and not _asked(req, call):
        return Refused(changed(call))
    if req.call(call_id).resolution is None:
        if not wait:
            return Refused(waiting(call, req.id))
        req = await gate.await_request(req.id)
    return await _run_decided(gate, req, call, call_id, run)


def _asked(req: ApprovalRequest, call: ToolCall) -> bool:
    asked = req.action_request(call.id)
    return asked.name == call.name and dict(asked.args) == to_jsonable_python(call.args)


async def _run_decided(
    gate: Gate, req: ApprovalRequest, call: ToolCall, call_id: str, run: Run
) -> Outcome:
    state = req.call(call_id)
    asked = req.action_request(call_id)
    if asked.name != call.name:
        return Refused(changed(call))
    if state.execution is not None:  # its secret arguments may be sealed: compare nothing
        return Refused(already_ran(call, req.id))
    given = to_jsonable_python(call.args)
    final = merge_edit(call.args, state.action.args, gate.policy.secret_keys)
    edited = state.resolution == "edited"
    if given == dict(asked.args):
        to_run: Mapping[str, Any] = final if edited else call.args
    elif edited and given == to_jsonable_python(final):
        to_run = call.args  # the framework passed the edited arguments itself (validated)
    else:
        return Refused(changed(call))
    if not state.runnable:
        return Refused(messages.outcome_text(req, state, call.id))

    async def invoke(_stored: dict[str, Any]) -> Any:
        return await run(to_run)

    try:
        result = await gate.arun_approved(req, call_id, invoke, request_context(req, gate.policy))
    except AlreadyExecuted:  # another worker claimed it first
        return Refused(already_ran(call, req.id))
    shown = mask(dict(final), gate.policy.secret_keys) if edited else None
    return Ran(result, shown)


def with_edit_notice(outcome: Ran, name: str) -> Any:
    """A text result, told that a reviewer replaced the call (so the model does not retry it)."""
    if outcome.edited is None or not isinstance(outcome.result, str):
        return outcome.result
    return messages.edit_notice(name, outcome.edited, outcome.result)


def already_ran(call: ToolCall, request_id: str) -> str:
    return (
        f"The approved call `{call.name}` (id {call.id}, signoff request {request_id}) has "
        "already run (or is running); exactly once means the tool was not executed again."
    )


def unreviewed(call: ToolCall) -> str:
    return (
        f"The tool call `{call.name}` (id {call.id}) needs human approval, but signoff has no "
        "approval request for it on this thread, so it was not executed. (Was the run resumed "
        "on another thread, or from a state approved outside signoff?)"
    )


def waiting(call: ToolCall, request_id: str) -> str:
    return (
        f"`{call.name}` is still waiting for a human decision (signoff request {request_id}); "
        "the tool was not executed."
    )


def changed(call: ToolCall) -> str:
    return (
        f"The tool call `{call.name}` (id {call.id}) is not the call signoff reviewed (its "
        "name or arguments changed), so it was not executed: signoff runs only what the "
        "approver saw. To change an approved call's arguments, use an edit decision."
    )


def local_gate(gate_or_config: Any, integration: str) -> Gate:
    """A :class:`Gate` given as itself or as the path of a ``signoff.yaml``.

    The store is the authority on resumed calls, so the gate must hold it: a remote gate (a
    ``remote:`` section) is refused with what to do instead.
    """
    gate = (
        Gate.from_config(gate_or_config)
        if isinstance(gate_or_config, str | os.PathLike)
        else gate_or_config
    )
    if not isinstance(gate, Gate):
        raise SignoffError(
            f"{integration} needs a local signoff Gate (or a signoff.yaml path), got "
            f"{type(gate).__name__}: a remote gate is not supported here yet; point the "
            "config at the server's store instead"
        )
    return gate


def ambient_context(
    thread: str | None = None, agent: str | None = None, user_request: str | None = None
) -> CallContext:
    """The ``gate.context(...)`` around the caller; ``thread``, ``agent`` and ``user_request``
    fill in what it leaves unset (a framework's conversation id, a configured default, the
    user's message)."""
    ctx = current_context()
    return merged_context(
        ctx,
        None,
        thread=thread if ctx.thread == DEFAULT_THREAD else None,
        agent=agent if ctx.agent is None else None,
        user_request=user_request if ctx.user_request is None else None,
    )
