"""Who may see and do what with a request — the server's authorization rules in one place.

* An **agent** sees, waits on and cancels only the requests it submitted (by agent name).
* An **approver** sees the requests they could decide (by role or name, including after an
  escalation), the ones they already decided, and the ones made on their own behalf.
  Whether a decision is accepted is the gate's call (roles, quorum, self-approval).
* An **admin** (a person holding one of ``auth.admin_roles``) sees everything and may cancel.
"""

from __future__ import annotations

from signoff.channels.menu import needs_person
from signoff.model import ApprovalRequest, chains, same_person
from signoff.model.resolution import is_self_approval, may_decide
from signoff.server.errors import forbidden
from signoff.server.identity import Identity


def may_see(who: Identity, req: ApprovalRequest) -> bool:
    if who.admin:
        return True
    if who.agent:
        return req.agent == who.name
    if same_person(req.principal.id, who.name, who.key) or any(
        same_person(d.approver, who.name, who.key) for d in req.decisions
    ):
        return True
    return any(
        may_decide(cfg, req, who.name, who.roles, who.key) is None for cfg in req.review_configs
    )


def decidable_calls(who: Identity, req: ApprovalRequest) -> set[str]:
    """Ids of the calls ``who`` could decide now (for showing buttons; the gate re-checks)."""
    if not who.approver or not req.pending:
        return set()
    out = set()
    for cfg, call in zip(req.review_configs, req.calls, strict=True):
        if call.resolution is not None or chains.done_with(cfg, call, who.name, who.key):
            continue
        if may_decide(cfg, req, who.name, who.roles, who.key) is None:
            out.add(call.tool_call_id)
    return out


def awaits_approval(who: Identity, req: ApprovalRequest) -> bool:
    """Whether ``who`` could approve some call now — the inbox's "needs you". Narrower than
    :func:`decidable_calls`: a later stage of a chain, or a requester who may only reject
    their own call, may reject now but is not the one the call waits for."""
    return who.approver and bool(needs_person(req, who.name, who.roles, who.key))


def self_approval_only_reject(who: Identity, req: ApprovalRequest, tool_call_id: str) -> bool:
    """The requester may reject their own call but not approve, edit or answer it."""
    return is_self_approval(req.config(tool_call_id), req, who.name, who.key)


def may_cancel(who: Identity, req: ApprovalRequest) -> bool:
    return who.admin or (who.agent and req.agent == who.name)


def require_agent(who: Identity, doing: str) -> None:
    if not who.agent:
        raise forbidden(
            f"only agent tokens may {doing}; create one with `signoff token create --agent NAME`"
        )


def require_approver(who: Identity, doing: str) -> None:
    if not who.approver:
        raise forbidden(
            f"agent tokens may not {doing}; decisions need an approver "
            "(`signoff token create --approver NAME`)"
        )
