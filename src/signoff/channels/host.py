"""What a channel needs of the gate — and nothing more.

Channels are handed the gate that owns them (to read a request, record a decision, look up
people and the store's outbox), but they never import :mod:`signoff.gate`: the gate builds
its channels through a registry that the composition root (:mod:`signoff.assemble`) fills,
and this protocol is the whole of what a channel may use. Keeping the cut here means a new
channel is one module against a small contract, and the gate never depends on channels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from signoff.model import ApprovalRequest, Decision
from signoff.policy import Policy
from signoff.store import Store


class LinkBase(Protocol):
    """The part of the delivery worker that knows where the web inbox is."""

    def base_url(self) -> str | None: ...


class GateHandle(Protocol):
    """The gate as a channel sees it: its policy and store, reading and deciding requests."""

    @property
    def policy(self) -> Policy: ...

    @property
    def store(self) -> Store: ...

    @property
    def delivery(self) -> LinkBase | None: ...

    async def get(self, request_id: str) -> ApprovalRequest: ...

    def grant_preview(self, req: ApprovalRequest, call_id: str, approver: str) -> str: ...

    async def adecide(
        self,
        request_id: str,
        decisions: Sequence[Decision | Mapping[str, Any]],
        *,
        approver: str | None = None,
        channel: str = "api",
        approver_roles: Iterable[str] | None = None,
    ) -> ApprovalRequest: ...
