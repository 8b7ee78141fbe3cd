"""Standing approvals: a ``scope: thread`` approve covers later calls of the same tool.

Applied when a request is created: for each call still needing a decision, a grant given on
the same thread by a person who could approve the call alone (quorum 1, allowed to decide,
not the requester when self-approval is forbidden) auto-approves it, audited as
``auto_approved``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from signoff.model import ApprovalRequest, DecisionRecord, utcnow
from signoff.model.resolution import ThreadGrant, Transition, apply_decisions, may_decide

if TYPE_CHECKING:
    from signoff.gate.core import Gate


async def _granted_tools(gate: Gate, grants: Sequence[ThreadGrant]) -> dict[tuple[str, str], str]:
    """The tool each thread grant was given for (read from the granting request)."""
    tools: dict[tuple[str, str], str] = {}
    for grant in grants:
        source = await gate.store.get_request(grant.request_id)
        if source is None:
            continue
        try:
            tools[(grant.request_id, grant.tool_call_id)] = source.action_request(
                grant.tool_call_id
            ).name
        except KeyError:
            continue
    return tools


async def apply_thread_grants(gate: Gate, req: ApprovalRequest) -> ApprovalRequest | None:
    """Auto-approve what the thread's grants cover; the updated request, or None if nothing."""
    grants = await gate.store.thread_grants(req.thread)
    if not grants:
        return None
    granted_tools = await _granted_tools(gate, grants)
    latest: ApprovalRequest | None = None
    for call, cfg in zip(req.calls, req.review_configs, strict=True):
        for grant in grants:
            if granted_tools.get((grant.request_id, grant.tool_call_id)) != cfg.action_name:
                continue  # a grant covers later calls of the same tool only
            roles = gate.policy.roles_of(grant.approver)
            if not cfg.allow_thread_approval or cfg.approvers.quorum > 1:
                continue
            if may_decide(cfg, req, grant.approver, roles) is not None:
                continue
            if cfg.forbid_self_approval and grant.approver == req.principal.id:
                continue
            record = DecisionRecord(
                tool_call_id=call.tool_call_id,
                type="approve",
                approver=grant.approver,
                channel="thread_grant",
                at=utcnow(),
                message=f"approved for the whole thread in request {grant.request_id}",
            )

            def mutate(
                r: ApprovalRequest,
                record: DecisionRecord = record,
                roles: frozenset[str] = roles,
            ) -> Transition:
                tr = apply_decisions(r, [record], approver_roles=roles, now=utcnow())
                for ev in tr.events:
                    if ev.event == "decided":
                        ev.event = "auto_approved"
                return tr

            tr = await gate.update(req.id, mutate)
            await gate.queue_notifications(tr)
            latest = tr.request
            break
    return latest
