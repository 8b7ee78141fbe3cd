"""A MemoryStore that fails a test when anyone changes a request snapshot it handed out.

The MemoryStore shares its stored request (a read-only snapshot) with readers, waiters and
the caller of ``update_request`` instead of copying it for each (copy on write). This store
remembers each snapshot's JSON form when it is stored and checks it is unchanged when the
snapshot is read for a change, after the change (the replaced snapshot, still held by
earlier readers, must not have moved), and when the store closes.
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
        old = self._requests.get(request_id)
        try:
            return await self._update(request_id, mutate)
        finally:
            # the snapshot a change replaces (shared with earlier readers, and sharing its
            # review configs with the change's working copy) keeps its state
            if old is not None and request_id in self._forms:
                assert old.model_dump(mode="json") == self._forms[request_id], (
                    f"request {request_id}: a change altered the snapshot it replaced"
                )
            if self._requests.get(request_id) is not old:
                self._remember(request_id)

    async def _update(self, request_id: str, mutate: Mutation) -> Transition:
        return await super().update_request(request_id, mutate)

    async def close(self) -> None:
        self.assert_untouched()
        await super().close()
