"""Exactly-once execution of an approved call: :func:`run_once` is shared by the local and
the remote gate; :class:`LedgerMethods` is the local gate's claim/finish (a mixin of
:class:`~signoff.gate.core.Gate`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from signoff.gate.decisions import check_known_person, request_context
from signoff.model import (
    ApprovalRequest,
    CallContext,
    DecisionError,
    NotAuthorized,
    ToolCall,
    utcnow,
)
from signoff.model.resolution import Transition, mark_execution, may_decide, reconcile
from signoff.policy import Policy

if TYPE_CHECKING:
    from signoff.gate.core import Gate

Claim = Callable[[str, str], Awaitable[None]]
Finish = Callable[..., Awaitable[None]]


async def run_once(
    req: ApprovalRequest,
    call_id: str,
    run: Callable[[dict[str, Any]], Awaitable[Any]],
    *,
    claim: Claim,
    finish: Finish,
) -> Any:
    """Claim ``executing`` on the ledger, run with the final arguments, record the outcome.

    A second claim raises :class:`AlreadyExecuted`; a crash between claim and finish leaves
    ``executing`` for a human to reconcile, never a silent re-run.
    """
    args = dict(req.call(call_id).action.args)
    await claim(req.id, call_id)
    try:
        result = await run(args)
    except BaseException as exc:
        await finish(req.id, call_id, error=f"{type(exc).__name__}: {exc}")
        raise
    await finish(req.id, call_id)
    return result


class LedgerMethods:
    """``aclaim`` / ``afinish`` / ``arun_approved`` on the gate's store."""

    policy: Policy
    # provided by the Gate (Changes.update, Gate.counts_executions, Gate.record_execution)
    update: Callable[[str, Callable[[ApprovalRequest], Transition]], Awaitable[Transition]]
    counts_executions: Callable[[str], bool]
    record_execution: Callable[[ToolCall, CallContext], None]

    async def aclaim(self, request_id: str, call_id: str, *, actor: str | None = None) -> None:
        """Mark an approved call ``executing``; raises AlreadyExecuted on a second claim."""
        await self.update(
            request_id,
            lambda r: mark_execution(
                r, call_id, "executing", now=utcnow(), actor=actor, in_place=True
            ),
        )

    async def afinish(
        self, request_id: str, call_id: str, *, error: str | None = None, actor: str | None = None
    ) -> None:
        step: Literal["executed", "failed"] = "failed" if error is not None else "executed"
        await self.update(
            request_id,
            lambda r: mark_execution(
                r, call_id, step, now=utcnow(), error=error, actor=actor, in_place=True
            ),
        )

    async def arun_approved(
        self,
        req: ApprovalRequest,
        call_id: str,
        run: Callable[[dict[str, Any]], Awaitable[Any]],
        ctx: CallContext | None = None,
    ) -> Any:
        """Run an approved/edited call exactly once with its final arguments."""
        result = await run_once(req, call_id, run, claim=self.aclaim, finish=self.afinish)
        call = req.call(call_id)
        if self.counts_executions(call.action.name):  # the context only for a rate-limited tool
            self.record_execution(
                ToolCall(call.action.name, call.action.args, id=call_id),
                ctx or request_context(req, self.policy),
            )
        return result

    async def areconcile(
        self,
        request_id: str,
        call_id: str,
        *,
        outcome: Literal["executed", "failed"],
        actor: str,
        message: str | None = None,
    ) -> ApprovalRequest:
        """Record how an interrupted execution ended (audited ``reconciled``): only for a call
        still ``executing`` after ``gate.execution_timeout``, by someone who may decide it."""
        gate: Gate = self  # type: ignore[assignment]
        await gate.astart()
        check_known_person(gate.policy, actor)
        roles = gate.policy.roles_of(actor)
        before = utcnow() - timedelta(seconds=gate.settings.execution_timeout)

        def mutate(r: ApprovalRequest) -> Transition:
            try:
                cfg = r.config(call_id)
            except KeyError:
                raise DecisionError(
                    f"no call {call_id!r} in request {r.id}", field="call"
                ) from None
            refusal = may_decide(cfg, r, actor, roles, gate.policy.person_key)
            if refusal is not None:
                raise NotAuthorized(refusal, field="approver")
            return reconcile(
                r, call_id, outcome, actor=actor, message=message, now=utcnow(),
                interrupted_before=before,
            )  # fmt: skip

        tr = await gate.update(request_id, mutate)
        await gate.after_change(tr)
        return tr.request

    def reconcile(
        self,
        request_id: str,
        call_id: str,
        *,
        outcome: Literal["executed", "failed"],
        actor: str,
        message: str | None = None,
    ) -> ApprovalRequest:
        gate: Gate = self  # type: ignore[assignment]
        return gate.run_sync(
            self.areconcile(request_id, call_id, outcome=outcome, actor=actor, message=message)
        )
