"""The approval menu every terminal surface shares, written once.

``signoff watch`` (the Textual inbox), the console channel's interactive prompt and
``signoff demo --terminal`` all use these keys and build their decisions here, so a key
means the same thing everywhere and every decision goes through the gate's (or the API's)
own validation. The keys follow deepagents' menu: ``y``/``1`` approve, ``n``/``2`` reject,
``a``/``3`` approve and grant for this thread.

Nothing here imports a terminal library: the Textual app and the line prompt draw it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from signoff.channels import message
from signoff.model import ApprovalRequest, DecisionError, chains
from signoff.model.identity import PersonKey, person_key
from signoff.model.resolution import is_self_approval, may_decide
from signoff.model.text import inert

if TYPE_CHECKING:
    from signoff.policy import Policy


@dataclass(frozen=True, slots=True)
class MenuItem:
    """One entry of the menu: what it does, the keys that choose it, what it says."""

    action: str
    keys: tuple[str, ...]
    label: str
    needs: str | None  # the decision type the call must allow (None: always offered)


MENU: tuple[MenuItem, ...] = (
    MenuItem("approve", ("y", "1"), "approve", "approve"),
    MenuItem("reject", ("n", "2"), "reject (asks for the reason)", "reject"),
    MenuItem("grant", ("a", "3"), "approve and grant for this thread", "approve"),
    MenuItem("edit", ("e",), "edit the editable arguments", "edit"),
    MenuItem("respond", ("s",), "respond", "respond"),
    MenuItem("open", ("o", "enter"), "open the detail", None),
)
#: The keys of the full-screen inbox only (moving, filtering, help, quitting).
NAVIGATION: tuple[tuple[str, str], ...] = (
    ("j / k / ↑ / ↓", "move"),
    ("/", "filter"),
    ("?", "help"),
    ("q", "quit"),
)

_BY_KEY = {key: item for item in MENU for key in item.keys}


def item_for(key: str) -> MenuItem | None:
    """The menu item a key (``y``, ``1``, ``enter`` …) chooses, or None."""
    return _BY_KEY.get(key.strip().lower())


def offered(req: ApprovalRequest, call_id: str) -> list[MenuItem]:
    """The items this call's review config allows (a grant also needs a single approval and
    ``allow_thread_approval``)."""
    cfg = req.config(call_id)
    items = []
    for item in MENU:
        if item.needs is not None and item.needs not in cfg.allowed_decisions:
            continue
        standing_ok = cfg.allow_thread_approval and cfg.approvers.needs_one
        if item.action == "grant" and not standing_ok:
            continue
        if item.action == "edit" and not cfg.editable_args:
            continue
        items.append(item)
    return items


def menu_line(items: Iterable[MenuItem]) -> str:
    """``[y/1] approve  [n/2] reject …`` for a one-line prompt."""
    return "  ".join(f"[{'/'.join(i.keys)}] {i.label}" for i in items)


# ---------------------------------------------------------------------- decisions
def approve(call_id: str, message: str | None = None) -> dict[str, Any]:
    return {"tool_call_id": call_id, "type": "approve", "message": message}


def grant(call_id: str) -> dict[str, Any]:
    """Approve, and grant later calls of the same tool under the same rule, from the same
    agent for the same principal on this thread (``grants.default_ttl``)."""
    return {"tool_call_id": call_id, "type": "approve", "scope": "thread"}


def reject(call_id: str, reason: str) -> dict[str, Any]:
    reason = reason.strip()
    if not reason:
        raise DecisionError("a rejection needs a reason (the agent sees it)", field="message")
    return {"tool_call_id": call_id, "type": "reject", "message": reason}


def respond(call_id: str, answer: str) -> dict[str, Any]:
    answer = answer.strip()
    if not answer:
        raise DecisionError("an empty answer cannot be sent", field="message")
    return {"tool_call_id": call_id, "type": "respond", "message": answer}


def editable_names(req: ApprovalRequest, call_id: str) -> list[str]:
    cfg = req.config(call_id)
    args = req.call(call_id).action.args
    return list(args) if cfg.editable_args == "*" else list(cfg.editable_args)


def edit(req: ApprovalRequest, call_id: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """An edit decision from the full new arguments; refused here (naming the argument)
    when a non-editable one changed — the gate re-checks the schema and the policy."""
    current = req.call(call_id).action.args
    allowed = set(editable_names(req, call_id))
    for name in set(current) | set(args):
        if name not in allowed and current.get(name) != args.get(name):
            raise DecisionError(
                f"{inert(name)} may not be edited (editable: {', '.join(sorted(allowed))})",
                field=f"args.{inert(name)}",
            )
    action = req.call(call_id).action
    return {
        "tool_call_id": call_id,
        "type": "edit",
        "edited_action": {"name": action.name, "args": dict(args)},
    }


def parse_args_json(text: str) -> dict[str, Any]:
    """The arguments an approver typed or wrote in ``$EDITOR``: one JSON object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DecisionError(
            f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", field="args"
        ) from None
    if not isinstance(value, dict):
        raise DecisionError("the arguments must be one JSON object", field="args")
    return value


def parse_value(text: str) -> Any:
    """One argument typed in a form: JSON when it parses (``25``, ``true``), else text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


# ---------------------------------------------------------------------- who may decide
def principal_may_decide(policy: Policy, req: ApprovalRequest, principal: str) -> bool:
    """Whether the principal (the person at the agent's own terminal or MCP client) alone
    may approve every undecided call: only where the rule lets the principal approve
    (``forbid_self_approval: false``, the principal admitted, no quorum)."""
    if policy.people and principal not in policy.people:
        return False
    roles = policy.roles_of(principal) or frozenset(req.principal.roles)
    for call_id in req.pending_call_ids:
        cfg = req.config(call_id)
        if cfg.forbid_self_approval or "approve" not in cfg.allowed_decisions:
            return False
        if not cfg.approvers.needs_one or may_decide(cfg, req, principal, roles) is not None:
            return False
    return True


def needs_person(
    req: ApprovalRequest, person: str, roles: Collection[str], key: PersonKey = person_key
) -> list[str]:
    """The undecided calls ``person`` may approve now: admitted (for a chain, by the stage now
    asked), not yet counted, and not their own request where self-approval is forbidden.
    ``key`` compares names the policy's way (aliases)."""
    found = []
    for call_id in req.pending_call_ids:
        cfg, call = req.config(call_id), req.call(call_id)
        if chains.done_with(cfg, call, person, key):
            continue
        if is_self_approval(cfg, req, person, key):
            continue
        if may_decide(cfg, req, person, roles, key) is not None:
            continue
        if cfg.approvers.chained and chains.refusal(
            cfg, call, person, roles, escalated=req.escalated, key=key
        ):
            continue
        found.append(call_id)
    return found


def call_progress(req: ApprovalRequest, call_id: str) -> str:
    """``stage 2 of 2: 1 of 2 finance approvals`` for a chain, else ``1/2``."""
    cfg, call = req.config(call_id), req.call(call_id)
    return chains.progress(cfg, call) or f"{len(call.approvals)}/{call.quorum}"


def waiting_for(req: ApprovalRequest) -> str:
    """``waiting for role finance (1 of 2)… deadline at 12:00 UTC (in 5 min)``."""
    parts = []
    for call_id in req.pending_call_ids:
        cfg, call = req.config(call_id), req.call(call_id)
        if cfg.approvers.chained:
            parts.append(inert(chains.progress(cfg, call)))
            continue
        who = cfg.approvers
        group = (
            "any approver"
            if who.any
            else " or ".join([f"role {r}" for r in who.roles] + list(who.users))
        )
        parts.append(f"{inert(group)} ({len(call.approvals)} of {call.quorum})")
    waiting = "; ".join(dict.fromkeys(parts)) or "a decision"
    return f"waiting for {waiting}… deadline {message.expires_in(req)}"


def progress(req: ApprovalRequest) -> str:
    """Quorum or chain progress of the undecided calls."""
    return ", ".join(dict.fromkeys(call_progress(req, c) for c in req.pending_call_ids))


def left_note(req: ApprovalRequest) -> str:
    """The short note a decided request leaves with (``approved by bob``)."""
    return inert(message.outcome(req))
