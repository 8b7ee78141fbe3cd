"""Applying a change to a stored request, and what follows it (outbox updates, channels told
of a resolution). Used by every module of the gate; a mixin of
:class:`~signoff.gate.core.Gate`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from signoff.gate.submission import notify
from signoff.gate.wiring import DeliveryWorker, Notifier
from signoff.model import ApprovalRequest, SignoffError, StoreError
from signoff.model.resolution import Transition
from signoff.model.secrets import sealed
from signoff.policy.redact import Redaction
from signoff.store import Store

if TYPE_CHECKING:
    from signoff.gate.core import Gate

log = logging.getLogger("signoff.gate")


class Changes:
    """``update`` (one transaction), ``queue_notifications`` and ``after_change``."""

    store: Store
    delivery: DeliveryWorker | None
    channels: list[Notifier]
    redaction: Redaction

    async def update(
        self, request_id: str, mutate: Callable[[ApprovalRequest], Transition]
    ) -> Transition:
        """Apply a pure state change in one store transaction (store errors as StoreError)."""
        delivery = self.delivery

        def change(r: ApprovalRequest) -> Transition:
            # Finished calls lose their secrets and audit events get redacted arguments in
            # the same transaction, whatever the change (model/secrets.py); the messages the
            # change announces (an escalation's prompts…) are stored in its commit too.
            tr = sealed(mutate(r), self.redaction)
            if delivery is not None and tr.changed:
                try:
                    tr.outbox.extend(delivery.in_commit(tr))
                except Exception:  # never the change's failure: queued after it instead
                    log.exception("planning the notifications of %s failed", request_id)
            return tr

        try:
            tr = await self.store.update_request(request_id, change)
        except SignoffError:
            raise
        except Exception as exc:
            raise StoreError(f"store failed while updating {request_id}: {exc}") from exc
        if tr.outbox and delivery is not None:
            delivery.poke()  # stored by the commit: send them now
        return tr

    async def queue_notifications(self, tr: Transition) -> None:
        """Escalation notices, message updates and events for a change: queued in the
        outbox, never fatal."""
        if self.delivery is None or not tr.changed:
            return
        try:
            await self.delivery.on_change(tr)
        except Exception:
            log.exception("queueing notifications for %s failed", tr.request.id)

    async def after_change(self, tr: Transition) -> None:
        """Follow-ups of a stored change: outbox updates, in-process channels told of a
        resolution, or asked again when an edit moved a call to other approvers."""
        if not tr.changed:
            return
        await self.queue_notifications(tr)
        if tr.request.pending:
            if any(e.event in ("edit_rerouted", "stage_started") for e in tr.events):
                # the new rule's approvers, or the next stage of an approval chain
                await notify(cast("Gate", self), tr.request)
            return
        for channel in self.channels:
            try:
                await channel.resolved(tr.request, cast("Gate", self))
            except Exception as exc:
                log.warning("channel %s failed to update: %s", channel.name, exc)
