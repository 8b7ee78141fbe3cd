"""A MemoryStore that fails a test when anyone changes a request snapshot it handed out.

The MemoryStore shares its stored request (a read-only snapshot) with readers, waiters and
the caller of ``update_request`` instead of copying it for each (copy on write). This store
remembers each snapshot's JSON form when it is stored and checks it is unchanged when the
snapshot is replaced, read for a change, and when the store closes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from signoff.model import ApprovalRequest, AuditEvent, Transition
from signoff.store import MemoryStore
from signoff.store.base import Mutation, OutboxItem


class SnapshotCheckingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self._forms: dict[str, dict[str, Any]] = {}

    def assert_untouched(self, request_id: str | None = None) -> None:
        ids = [request_id] if request_id is not None else list(self._forms)
        for rid in ids:
            snapshot = self._requests.get(rid)
            if snapshot is not None and rid in self._forms:
                assert snapshot.model_dump(mode="json") == self._forms[rid], (
                    f"request {rid}: a snapshot the store handed out was changed in place"
                )

    def _remember(self, request_id: str) -> None:
        self._forms[request_id] = self._requests[request_id].model_dump(mode="json")

    async def create_request(
        self,
        request: ApprovalRequest,
        events: list[AuditEvent],
        outbox: Sequence[OutboxItem] = (),
    ) -> tuple[ApprovalRequest, bool]:
        stored, created = await super().create_request(request, events, outbox)
        if created:
            self._remember(request.id)
        return stored, created

    async def update_request(self, request_id: str, mutate: Mutation) -> Transition:
        self.assert_untouched(request_id)
        tr = await super().update_request(request_id, mutate)
        if tr.changed:
            self._remember(request_id)
        return tr

    async def close(self) -> None:
        self.assert_untouched()
        await super().close()
