"""The tools node's half: run a call only as its review allows, approved calls exactly once.

This wrapper is the last line of defence, whatever happened upstream: a call reaches the
tool only if signoff allowed it, or a human approved it (then with the approved — possibly
edited — arguments, claimed on the exactly-once ledger first). A call signoff never saw,
or whose arguments changed after review, is checked again; if it needs a human and the
graph cannot wait here (interrupt mode), it is refused, never run.
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.messages import ToolCall as LCToolCall
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command

from signoff.gate.core import request_context
from signoff.integrations.langchain import _messages as msgs
from signoff.integrations.langchain._effects import Flow, Io, Next
from signoff.integrations.langchain._ids import scoped
from signoff.integrations.langchain._review import Reviewed, Where, step_context, where
from signoff.integrations.langchain._settings import Settings
from signoff.model import AlreadyExecuted, ApprovalRequest, ToolCall, Verdict
from signoff.policy.redact import mask

ToolResult = ToolMessage | Command[Any]


def tool_flow(s: Settings, request: ToolCallRequest) -> Flow[ToolResult]:
    call = request.tool_call
    call_id = scoped(_message_of(request, call["id"] or ""), call["id"] or "")
    place = _place(s, request)
    seen = s.memory.get(place.thread, call_id)
    if seen is None or not seen.matches(call):
        recovered = yield from _recover(s, request, place, call_id)
        if isinstance(recovered, ToolMessage):
            return recovered
        seen = recovered
    if seen.verdict.denied:
        return msgs.denied(call, seen.verdict)
    if seen.verdict.allowed:
        if seen.request_id is not None and s.mode == "blocking":  # hold_ungated
            yield Io(s.gate.await_request(seen.request_id), waits=True)
        result = yield Next(request)
        _count(s, call["name"], call["args"], call_id, seen)
        return result  # type: ignore[no-any-return]
    assert seen.request_id is not None
    req = s.snapshots.decided(seen.request_id)
    if req is None:
        req = yield Io(s.gate.get(seen.request_id))
    if req.pending and s.mode == "blocking":
        req = yield Io(s.gate.await_request(req.id), waits=True)
    if req.pending:
        return msgs.refused(
            call,
            f"`{call['name']}` is still waiting for a human decision (signoff request "
            f"{req.id}); the tool was not executed.",
        )
    return (yield from _run_reviewed(s, request, req, seen, call_id))


def _run_reviewed(
    s: Settings, request: ToolCallRequest, req: ApprovalRequest, seen: Reviewed, call_id: str
) -> Flow[ToolResult]:
    """Run an approved call (``call_id``: the stored, turn-scoped id) exactly once."""
    call = request.tool_call
    state = req.call(call_id)
    if not state.runnable:
        return msgs.answer(req, state, call["name"], call["id"] or "")
    key = (req.id, call_id)
    if key in s.paused_runs:
        s.paused_runs.discard(key)  # the same execution, resumed after its tool paused
    else:
        try:
            yield Io(s.gate.aclaim(req.id, call_id))
        except AlreadyExecuted as exc:
            return msgs.refused(call, f"{exc.message}. The tool was not executed again.")
    final = dict(state.action.args)
    edited = final != dict(req.action_request(call_id).args)
    to_run = request.override(tool_call={**call, "args": final}) if edited else request
    try:
        result = yield Next(to_run)
    except GraphBubbleUp:
        s.paused_runs.add(key)  # e.g. a subagent's own approval: resumes, not a re-run
        raise
    except Exception as exc:
        yield Io(s.gate.afinish(req.id, call_id, error=f"{type(exc).__name__}: {exc}"))
        raise
    _status, error = msgs.status_of(result)
    # Claimed before it ran, so exactly-once holds whenever this commits: a crash first
    # leaves "executing" for a human to reconcile, never a re-run. The model step that
    # follows settles it (a return_direct tool ends the run: settled here).
    yield Io(s.gate.afinish(req.id, call_id, error=error), later=not _ends_run(request))
    _count(s, call["name"], final, call_id, seen)
    if edited and s.edit_notice:
        shown = mask(final, s.gate.policy.secret_keys)  # the model never reads a secret back
        return msgs.with_edit_notice(result, call["id"] or "", call["name"], shown, s.edit_notice)
    return result  # type: ignore[no-any-return]


def _count(s: Settings, name: str, args: Any, call_id: str, seen: Reviewed) -> None:
    """Count an executed call for the policy's rate limits (a ``ToolCall`` only for a tool
    that has one: most have none)."""
    if s.gate.counts_executions(name):
        s.gate.record_execution(ToolCall(name, args, id=call_id), seen.ctx)


def _ends_run(request: ToolCallRequest) -> bool:
    return bool(getattr(request.tool, "return_direct", False))


def _recover(
    s: Settings, request: ToolCallRequest, place: Where, call_id: str
) -> Flow[Reviewed | ToolMessage]:
    """No usable verdict in memory (a restart, a retry, or a call changed after review)."""
    call = request.tool_call
    if not s.gate.writable:
        yield Io(s.gate.ensure_writable())
    req = yield Io(s.gate.store.find_request_by_call(place.thread, call_id))
    if req is not None:
        action = req.action_request(call_id)
        if action.name != call["name"] or dict(action.args) != call["args"]:
            return msgs.refused(call, _changed_text(call))
        verdict = Verdict("require_approval", action.rule)
        return Reviewed(
            action.name, action.args, verdict, request_context(req, s.gate.policy), req.id
        )
    ai = _message_of(request, call["id"] or "")
    ctx = step_context(s.gate, place, request.state.get("messages", []), ai or AIMessage(""))
    checked = ToolCall(call["name"], call["args"], id=call_id)
    verdict = s.gate.check(checked, ctx)
    if verdict.judge_pending:
        verdict = yield Io(s.gate.ajudge(checked, ctx, verdict))
    if not verdict.needs_approval:
        return Reviewed(call["name"], call["args"], verdict, ctx)
    if s.mode == "interrupt":
        return msgs.refused(call, _unreviewed_text(call))
    submission = yield Io(
        s.gate.asubmit_checked([ToolCall(call["name"], call["args"], id=call_id)], [verdict], ctx)
    )
    assert submission.request is not None  # a verdict needing approval always stores one
    return Reviewed(call["name"], call["args"], verdict, ctx, submission.request.id)


def _place(s: Settings, request: ToolCallRequest) -> Where:
    fallback = ""
    if not (request.runtime.config.get("configurable") or {}).get("thread_id"):
        ai = _message_of(request, request.tool_call["id"] or "")
        fallback = f"langchain:{ai.id}" if ai is not None else "langchain"
    return where(request.runtime.config, s.principal, s.agent, fallback)


def _message_of(request: ToolCallRequest, call_id: str) -> AIMessage | None:
    for message in reversed(request.state.get("messages", []) if request.state else []):
        if isinstance(message, AIMessage) and any(c["id"] == call_id for c in message.tool_calls):
            return message
    return None


def _changed_text(call: LCToolCall) -> str:
    return (
        f"The tool call `{call['name']}` (id {call['id']}) changed after signoff reviewed it, "
        "so it was not executed: signoff runs only what it reviewed (and approvers saw). "
        "Either another middleware changed it after SignoffMiddleware (make SignoffMiddleware "
        "the last entry of create_agent(middleware=[...])), or the graph state was edited "
        "(agent.update_state) after review; to change an approved call's arguments, use an "
        "edit decision."
    )


def _unreviewed_text(call: LCToolCall) -> str:
    return (
        f"The tool call `{call['name']}` (id {call['id']}) needs human approval but reached "
        "the tools without a review, so it was not executed. Make SignoffMiddleware the last "
        "entry of create_agent(middleware=[...]) so it sees the final tool calls."
    )
