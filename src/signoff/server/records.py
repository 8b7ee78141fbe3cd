"""What the server keeps besides requests and audit: API tokens, browser sessions, links.

The :class:`~signoff.store.Store` protocol knows approvals, not credentials, so the server
owns these three small tables through :class:`ServerDB`. Every secret is kept only as its
SHA-256: a leaked database (or backup) cannot be used to sign in or to decide. 256 random
bits need no slow hash or salt — nobody can brute-force them.

Backends: :mod:`.db_sqlite` (same file as the SQLite store, its own tables and migrations)
and :mod:`.db_memory` (tests, ``memory://`` stores). A PostgreSQL version implements the same
protocol.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Literal, Protocol

TokenKind = Literal["agent", "approver"]
LinkPurpose = Literal["login", "review", "approve", "reject"]

TOKEN_PREFIX: dict[TokenKind, str] = {"agent": "so_agent_", "approver": "so_appr_"}


def new_secret() -> str:
    """256 random bits, URL-safe (43 characters)."""
    return secrets.token_urlsafe(32)


def digest(secret: str) -> str:
    """The stored form of a secret: lookups go by this hash, so no timing side channel."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """A bearer token: an agent (``subject`` = agent name) or an approver (person id)."""

    id: str
    token_hash: str
    kind: TokenKind
    subject: str
    created_at: float
    trusted_roles: bool = False
    label: str | None = None
    revoked_at: float | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A signed-in browser. ``token_id`` ties it to the token it came from (revoking the
    token ends the session); login links and the SSO proxy leave it empty."""

    id_hash: str
    subject: str
    created_at: float
    expires_at: float
    token_id: str | None = None


@dataclass(frozen=True, slots=True)
class LinkRecord:
    """A one-click link: single use, bound to an approver and (except ``login``) a request;
    ``approve``/``reject`` links are bound to that decision too."""

    token_hash: str
    purpose: LinkPurpose
    approver: str
    created_at: float
    expires_at: float
    request_id: str | None = None
    used_at: float | None = None


class ServerDB(Protocol):
    """Durable home of tokens, sessions and links. Methods may be awaited from any loop."""

    async def open(self) -> None:
        """Create or migrate the tables. Idempotent."""

    async def close(self) -> None: ...

    async def secret(self) -> bytes:
        """A server-wide random key (CSRF tokens), created once and shared by replicas."""
        ...

    async def add_token(self, record: TokenRecord) -> None: ...

    async def token_by_hash(self, token_hash: str) -> TokenRecord | None: ...

    async def list_tokens(self) -> list[TokenRecord]: ...

    token_writes: int
    """Token creations and revocations made through this object (this process): a cache
    of tokens drops its entries at once when it moves."""

    async def tokens_version(self) -> int:
        """A number every change to the tokens, by any process or replica, moves."""
        ...

    async def revoke_token(self, token_id: str, now: float) -> bool:
        """Revoke a token and end its sessions; False when no active token has this id."""
        ...

    async def add_session(self, record: SessionRecord) -> None: ...

    async def session_by_hash(self, id_hash: str, now: float) -> SessionRecord | None:
        """The live session (unexpired, its token not revoked), or None."""
        ...

    async def delete_session(self, id_hash: str) -> None: ...

    async def add_link(self, record: LinkRecord) -> None: ...

    async def link_by_hash(self, token_hash: str) -> LinkRecord | None: ...

    async def consume_link(self, token_hash: str, now: float) -> LinkRecord | None:
        """Atomically mark an unused, unexpired link used; None if it was not."""
        ...

    async def release_link(self, token_hash: str) -> None:
        """Undo :meth:`consume_link` when the decision it carried was refused (422/403)."""
        ...

    async def burn_links(self, request_id: str, approver: str, now: float) -> int:
        """Use up an approver's other links to a request once they decided it."""
        ...
