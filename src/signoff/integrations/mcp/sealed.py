"""Sealed, single-use ``requestState`` for in-client answers on MCP 2026-07-28.

On 2026-07-28 a server cannot push ``elicitation/create``: it returns the question with an
opaque ``requestState`` and the client retries the same ``tools/call`` with the answer. The
retry is attacker-controlled input, so an answer only counts when it comes back with a state
this process minted for exactly this call:

* **sealed** — the SDK's ``RequestStateBoundary`` encrypts and authenticates the state
  (AES-GCM) and binds it to the method, tool name and an argument digest; a forged state or
  one replayed on other arguments is refused with ``-32602`` before a handler runs;
* **expiring** — the seal carries an outer TTL, and each ticket dies with its request's
  deadline (checked here, so a late answer gets a normal "expired" result);
* **single-use** — redeeming a ticket removes it; a second retry with the same state is
  refused (answered by the caller with an error result, audited).

A first call that arrives with answers but no state (a client "pre-approving" itself) is
simply asked: answers are read only from a redeemed ticket. The boundary API is provisional
in the SDK, so it is wrapped here and nowhere else.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

from signoff.model import utcnow

_PREFIX = "signoff.v1."
#: Outer bound on any state's life; a ticket's own deadline (its request's) is usually sooner.
DEFAULT_SEAL_TTL = 7 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class Ticket:
    """What a minted state stands for: one call of one request, until ``expires_at``."""

    request_id: str
    call_id: str
    expires_at: datetime


class SealedStates:
    """Mints and redeems request states; holds the boundary middleware that seals them."""

    def __init__(
        self,
        *,
        audience: str,
        keys: Sequence[bytes | str] | None = None,
        ttl: float = DEFAULT_SEAL_TTL,
    ) -> None:
        security = (
            RequestStateSecurity(keys=list(keys), ttl=ttl)
            if keys
            else RequestStateSecurity.ephemeral(ttl=ttl)
        )
        self.boundary = RequestStateBoundary(security, default_audience=audience)
        self._tickets: dict[str, Ticket] = {}

    def mint(self, request_id: str, call_id: str, expires_at: datetime) -> str:
        """A fresh plaintext state for this call (the boundary seals it on the way out)."""
        self._forget_expired()
        nonce = secrets.token_urlsafe(16)
        self._tickets[nonce] = Ticket(request_id, call_id, expires_at)
        return _PREFIX + nonce

    def redeem(self, state: str | None) -> Ticket | None:
        """The ticket for a (verified) state, consumed; None if unknown, used or expired."""
        if not state or not state.startswith(_PREFIX):
            return None
        ticket = self._tickets.pop(state[len(_PREFIX) :], None)
        if ticket is None or ticket.expires_at <= utcnow():
            return None
        return ticket

    def _forget_expired(self) -> None:
        if len(self._tickets) < 256:
            return
        now = utcnow()
        for nonce in [n for n, t in self._tickets.items() if t.expires_at <= now]:
            del self._tickets[nonce]

    def __len__(self) -> int:
        return len(self._tickets)
