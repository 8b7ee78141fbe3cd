"""``@remote_gate.guard``: gate a plain function through the server, sync or async.

The same contract as :func:`signoff.gate.guard.guard`: an allowed call runs at once, a
denied one raises :class:`Denied` (or returns the text with ``on_reject="return"``), a call
needing approval waits for the decision and runs exactly once with the final arguments.
Every verdict comes from the server, so the policy is never evaluated in the agent.
"""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any

from signoff.gate.context import current_context, use_context
from signoff.gate.guard import OnReject, denied_error, raise_for
from signoff.model import (
    ApprovalRequest,
    Cancelled,
    Expired,
    Rejected,
    Responded,
    ToolCall,
    Verdict,
)
from signoff.policy.redact import merge_edit

if TYPE_CHECKING:
    from signoff.client.remote import RemoteGate

_STOPPED = (Rejected, Responded, Expired, Cancelled)


def remote_guard(
    gate: RemoteGate,
    fn: Any = None,
    *,
    name: str | None = None,
    on_reject: OnReject = "raise",
) -> Any:
    if fn is None:
        return lambda f: remote_guard(gate, f, name=name, on_reject=on_reject)
    tool = name or fn.__name__
    sig = inspect.signature(fn)

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        return dict(sig.bind(*args, **kwargs).arguments) if args else dict(kwargs)

    def stopped(exc: Exception) -> Any:
        if on_reject == "return":
            return str(exc)
        raise exc

    async def decide_fate(call: ToolCall) -> tuple[Verdict, ApprovalRequest | None, ToolCall]:
        sub = await gate.asubmit([call], current_context(), fetch=False)
        verdict = sub.verdicts[0]
        call = ToolCall(call.name, call.args, id=sub.stored_id(call.id))  # re-attached?
        if verdict.needs_approval and sub.request_id:
            return verdict, await gate.await_request(sub.request_id), call
        return verdict, None, call

    def stop_reason(
        call: ToolCall, verdict: Verdict, req: ApprovalRequest | None
    ) -> Exception | None:
        if verdict.denied:
            return denied_error(call, verdict)
        if req is not None and not req.call(call.id).runnable:
            try:
                raise_for(req, req.call(call.id))
            except _STOPPED as exc:
                return exc
        return None

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            verdict, req, call = await decide_fate(ToolCall(tool, bind(args, kwargs)))
            reason = stop_reason(call, verdict, req)
            if reason is not None:
                return stopped(reason)
            if req is None or req.call(call.id).resolution == "approved":
                return await _run_as_called(gate, req, call.id, fn, args, kwargs)

            async def run(final: dict[str, Any]) -> Any:
                # The edited keys over our own arguments: the server shows secrets masked.
                return await fn(**merge_edit(call.args, final))

            return await gate.arun_approved(req, call.id, run)

        async_wrapper.signoff_tool = tool  # type: ignore[attr-defined]
        return async_wrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        async def fate() -> tuple[Verdict, ApprovalRequest | None, ToolCall]:
            with use_context(ctx):
                return await decide_fate(ToolCall(tool, bind(args, kwargs)))

        ctx = current_context()
        verdict, req, call = gate._run(fate())
        reason = stop_reason(call, verdict, req)
        if reason is not None:
            return stopped(reason)
        if req is None:
            return fn(*args, **kwargs)
        state = req.call(call.id)
        if state.resolution == "approved":  # as called: Python values (and secrets) intact

            def invoke() -> Any:
                return fn(*args, **kwargs)
        else:  # the edited keys over our own arguments: the server shows secrets masked
            final = merge_edit(call.args, state.action.args)

            def invoke() -> Any:
                return fn(**final)

        gate._run(gate.aclaim(req.id, call.id))
        try:
            result = invoke()
        except BaseException as exc:
            gate._run(gate.afinish(req.id, call.id, error=f"{type(exc).__name__}: {exc}"))
            raise
        gate._run(gate.afinish(req.id, call.id))
        return result

    wrapper.signoff_tool = tool  # type: ignore[attr-defined]
    return wrapper


async def _run_as_called(
    gate: RemoteGate,
    req: ApprovalRequest | None,
    call_id: str,
    fn: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """An allowed call, or an approved one (exactly once) with the arguments it was called
    with: Python values and secrets intact."""
    if req is None:
        return await fn(*args, **kwargs)

    async def run(_final: dict[str, Any]) -> Any:
        return await fn(*args, **kwargs)

    return await gate.arun_approved(req, call_id, run)
