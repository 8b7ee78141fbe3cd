"""The requests this server has just created, kept for their agent's first long-poll.

An agent submits, then long-polls the request it got back within milliseconds. Without this,
the long-poll reads the request (to check it is the agent's own and still pending) and the
store's wait reads it again once the waiter is registered: two reads. The submit handler
already holds the request as stored, so it leaves it here; the agent's first ``wait`` takes it
(once, and only when at most :data:`MAX_AGE` seconds old) instead of the first read. The
store's wait still reads the row after registering the waiter, so a decision, cancellation or
expiry in between is seen exactly as before; the ownership check is the same
(``req.agent == who.name``, which never changes). A miss — another replica took the submit,
the entry was used or is too old — is the ordinary read.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from signoff.model import ApprovalRequest

MAX_AGE = 1.0  # seconds: far below a waiter's lease renewal (a third of gate.lease)
MAX_KEPT = 1024


class JustSubmitted:
    """Bounded, use-once memory of ``request id → (created request, when)``."""

    def __init__(self, max_kept: int = MAX_KEPT, max_age: float = MAX_AGE) -> None:
        self._kept: OrderedDict[str, tuple[ApprovalRequest, float]] = OrderedDict()
        self._max_kept = max_kept
        self._max_age = max_age

    def put(self, request: ApprovalRequest) -> None:
        self._kept[request.id] = (request, time.monotonic())
        while len(self._kept) > self._max_kept:
            self._kept.popitem(last=False)

    def take(self, request_id: str, agent: str) -> ApprovalRequest | None:
        """The request if ``agent`` made it and it was kept less than ``max_age`` ago."""
        kept = self._kept.get(request_id)
        if kept is None:
            return None
        request, at = kept
        if request.agent != agent:
            return None  # not the owner's long-poll: leave it for the owner
        del self._kept[request_id]
        if time.monotonic() - at > self._max_age or not request.pending:
            return None
        return request
