"""Secrets in stored requests and audit events: where arguments live, and when they are sealed.

A request row keeps the real arguments while a call can still run (the tool needs them).
Once a call is *finished* — rejected, expired, cancelled, answered, or executed / failed —
the values of its secret-named arguments are replaced by a keyed digest
``{"redacted": "hmac-sha256:<hex>"}`` wherever the row holds them: the call as asked, the
call as it runs, and every edit proposed for it (the context's ``attrs`` too once every
call is finished). Audit events never hold arguments in clear: ``args`` and
``edited_args`` become a redacted copy cut at 4 KiB, next to ``args_digest`` /
``edited_args_digest``, the keyed digest of the real value.

Which names are secret, and the key, belong to the policy (:class:`Sealer` is implemented
by :class:`signoff.policy.redact.Redaction`); this module knows where a request and its
events keep arguments. The gate applies :func:`sealed` to every transition inside the
store's write transaction, so every store gets the same rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from signoff.model._built import assign
from signoff.model.audit import AuditEvent
from signoff.model.requests import ApprovalRequest, CallState
from signoff.model.resolution import Transition

#: Resolutions after which a call never runs.
FINISHED_RESOLUTIONS: frozenset[str] = frozenset({"rejected", "responded", "expired", "cancelled"})
#: Ledger states after which a call never runs again.
FINISHED_EXECUTIONS: frozenset[str] = frozenset({"executed", "failed"})
#: Audit ``data`` fields that hold a call's arguments.
ARG_FIELDS = ("args", "edited_args")


class Sealer(Protocol):
    """What the state machine needs from the redaction settings."""

    def seal(self, value: dict[str, Any]) -> dict[str, Any]:
        """``value`` with every secret-named value (any depth) replaced by its digest
        placeholder; ``value`` itself when it holds none. Idempotent."""
        ...

    def audited(self, args: Mapping[str, Any]) -> tuple[Any, str]:
        """The audit form of ``args``: a redacted copy (cut at 4 KiB) and the keyed digest
        of the real value."""
        ...


def finished(call: CallState) -> bool:
    """True once ``call`` can never run (again): its secrets are no longer needed."""
    return call.resolution in FINISHED_RESOLUTIONS or call.execution in FINISHED_EXECUTIONS


def seal_finished(req: ApprovalRequest, sealer: Sealer) -> None:
    """Seal the arguments of every finished call of ``req``, in place (``req`` is the copy a
    transition is building). Calls that may still run keep their real values."""
    done = {c.tool_call_id for c in req.calls if finished(c)}
    if not done:
        return
    # action requests, decisions and a call's action are replaced, never changed: a store's
    # working copy may share them with the snapshot it replaces (model/resolution.py, in_place)
    for i, action in enumerate(req.action_requests):
        if action.tool_call_id in done:
            args = sealer.seal(action.args)
            if args is not action.args:
                req.action_requests[i] = action.model_copy(update={"args": args})
    for call in req.calls:
        if call.tool_call_id in done:
            args = sealer.seal(call.action.args)
            if args is not call.action.args:  # replaced, not changed: it may be shared too
                call.action = call.action.model_copy(update={"args": args})
    for i, decision in enumerate(req.decisions):
        edited = decision.edited_action
        if decision.tool_call_id in done and edited is not None:
            args = sealer.seal(edited.args)
            if args is not edited.args:
                sealed_edit = edited.model_copy(update={"args": args})
                req.decisions[i] = decision.model_copy(update={"edited_action": sealed_edit})
    if len(done) == len(req.calls):
        attrs = req.attrs  # set either way, as before; an empty dict has nothing to seal
        assign(req, {"attrs": sealer.seal(attrs) if attrs else attrs})


def seal_events(events: Iterable[AuditEvent], sealer: Sealer) -> None:
    """Replace the arguments in each event's ``data`` by their audit form (redacted, cut)
    plus ``<field>_digest``."""
    for event in events:
        for name in ARG_FIELDS:
            value = event.data.get(name)
            if value is not None and isinstance(value, Mapping):  # no ABC check for None
                event.data[name], event.data[f"{name}_digest"] = sealer.audited(value)


def sealed(tr: Transition, sealer: Sealer) -> Transition:
    """``tr`` with finished calls sealed and its audit events' arguments redacted."""
    if tr.changed:
        seal_finished(tr.request, sealer)
        seal_events(tr.events, sealer)
    return tr


__all__ = [
    "ARG_FIELDS",
    "FINISHED_EXECUTIONS",
    "FINISHED_RESOLUTIONS",
    "Sealer",
    "finished",
    "seal_events",
    "seal_finished",
    "sealed",
]
