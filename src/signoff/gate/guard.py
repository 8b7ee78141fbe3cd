"""``@gate.guard``: gate a plain Python function (sync or async).

The allowed path costs a signature bind, a schema check, a policy evaluation and a queued
audit event — no I/O, no event loop. Only calls that need a human reach the async core.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from signoff.gate import messages
from signoff.gate.context import current_context
from signoff.model import (
    ApprovalRequest,
    CallContext,
    CallState,
    Cancelled,
    Denied,
    Expired,
    Rejected,
    Responded,
    Risk,
    ToolCall,
    Verdict,
)
from signoff.policy.redact import merge_edit

if TYPE_CHECKING:
    from signoff.gate.core import Gate

OnReject = Literal["raise", "return"]


def raise_for(req: ApprovalRequest, state: CallState) -> NoReturn:
    """Raise the exception matching a call that will not run."""
    name = req.action_request(state.tool_call_id).name
    text = messages.outcome_text(req, state)
    kw = {"call_id": state.tool_call_id, "tool": name, "request_id": req.id}
    exc: Rejected | Responded | Expired | Cancelled
    if state.resolution == "rejected":
        exc = Rejected(text, **kw)
    elif state.resolution == "responded":
        exc = Responded(text, **kw)
    elif state.resolution == "expired":
        exc = Expired(text, **kw)
    else:
        exc = Cancelled(text, **kw)
    exc.request = req
    raise exc


def denied_error(call: ToolCall, verdict: Verdict) -> Denied:
    """The :class:`Denied` a guarded call raises, carrying the model-facing text."""
    exc = Denied(messages.denied(call.name, verdict), call_id=call.id, tool=call.name)
    exc.verdict = verdict
    return exc


def guard(
    gate: Gate,
    fn: Any = None,
    *,
    name: str | None = None,
    risk: Risk | None = None,
    on_reject: OnReject = "raise",
    schema: Any = None,
) -> Any:
    """Gate ``fn``: decorate with ``@gate.guard`` or ``@gate.guard(name=..., risk=...)``.

    ``on_reject="return"`` returns the model-facing text instead of raising when the call is
    denied, rejected, answered, expired or cancelled (what an agent framework wants).
    """
    if fn is None:
        return lambda f: guard(gate, f, name=name, risk=risk, on_reject=on_reject, schema=schema)
    tool = name or fn.__name__
    gate.tool(tool, schema=schema if schema is not None else fn, risk=risk)
    sig = inspect.signature(fn)
    positional = [
        p.name
        for p in sig.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]

    # Defaults are part of the call: approvers and rules see what will actually run.
    defaults = {
        p.name: p.default
        for p in sig.parameters.values()
        if p.default is not p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if not args:
            return {**defaults, **kwargs} if defaults else dict(kwargs)
        if len(args) <= len(positional):
            bound = {**defaults, **dict(zip(positional, args, strict=False))}
            bound.update(kwargs)
            return bound
        ba = sig.bind(*args, **kwargs)
        ba.apply_defaults()
        return dict(ba.arguments)

    def stopped(exc: Exception) -> Any:
        if on_reject == "return":
            return str(exc)
        raise exc

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            call = ToolCall(tool, bind(args, kwargs))
            ctx = current_context()
            verdict = gate.check(call, ctx, risk=risk)
            if verdict.judge_pending:
                verdict = await gate.ajudge(call, ctx, verdict)
            if verdict.allowed:
                gate.record_execution(call, ctx)
                return await fn(*args, **kwargs)
            if verdict.denied:
                return stopped(denied_error(call, verdict))
            sub = await gate.asubmit_checked([call], [verdict], ctx)
            assert sub.request is not None
            call = ToolCall(call.name, call.args, id=sub.stored_id(call.id))  # re-attached?
            # the request as just stored: the wait's own read after it registers is the first
            req = await gate.await_request(sub.request.id, current=sub.request)
            state = req.call(call.id)
            if not state.runnable:
                try:
                    raise_for(req, state)
                except (Rejected, Responded, Expired, Cancelled) as exc:
                    return stopped(exc)

            async def run(final: dict[str, Any]) -> Any:
                if state.resolution == "approved":
                    return await fn(*args, **kwargs)  # as called: Python objects intact
                return await fn(**merge_edit(call.args, final, gate.policy.secret_keys))

            return await gate.arun_approved(req, call.id, run, ctx)

        async_wrapper.signoff_tool = tool  # type: ignore[attr-defined]
        return async_wrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        call = ToolCall(tool, bind(args, kwargs))
        ctx = current_context()
        verdict = gate.check(call, ctx, risk=risk)
        if verdict.judge_pending:
            verdict = gate.judge(call, ctx, verdict)
        if verdict.allowed:
            gate.record_execution(call, ctx)
            return fn(*args, **kwargs)
        if verdict.denied:
            return stopped(denied_error(call, verdict))
        req, call = gate._portal.run(_submit_and_wait(gate, call, verdict, ctx))
        state = req.call(call.id)
        if not state.runnable:
            try:
                raise_for(req, state)
            except (Rejected, Responded, Expired, Cancelled) as exc:
                return stopped(exc)
        if state.resolution == "approved":  # run as called: the args keep their Python types
            return _run_sync(gate, req, call, lambda: fn(*args, **kwargs), ctx)
        # The edited keys over our own arguments: a secret is always the one we were given.
        final = merge_edit(call.args, state.action.args, gate.policy.secret_keys)
        return _run_sync(gate, req, call, lambda: fn(**final), ctx)

    wrapper.signoff_tool = tool  # type: ignore[attr-defined]
    return wrapper


async def _submit_and_wait(
    gate: Gate, call: ToolCall, verdict: Verdict, ctx: CallContext
) -> tuple[ApprovalRequest, ToolCall]:
    """The outcome, and the call as the request knows it (another id when a restarted agent
    re-attached to the request it asked before)."""
    sub = await gate.asubmit_checked([call], [verdict], ctx)
    assert sub.request is not None
    call = ToolCall(call.name, call.args, id=sub.stored_id(call.id))
    return await gate.await_request(sub.request.id, current=sub.request), call


def _run_sync(
    gate: Gate, req: ApprovalRequest, call: ToolCall, invoke: Callable[[], Any], ctx: CallContext
) -> Any:
    """Exactly once: claim on the ledger, run in the caller's thread, record the outcome."""
    final = dict(req.call(call.id).action.args)
    gate._portal.run(gate.aclaim(req.id, call.id))
    try:
        result = invoke()
    except BaseException as exc:
        gate._portal.run(gate.afinish(req.id, call.id, error=f"{type(exc).__name__}: {exc}"))
        raise
    gate._portal.run(gate.afinish(req.id, call.id))
    gate.record_execution(ToolCall(call.name, final, id=call.id), ctx)
    return result
