"""Bearer tokens for agents and approvers: shown once, stored hashed, revocable.

A token is ``so_agent_…`` or ``so_appr_…`` plus 256 random bits; the prefix lets secret
scanners recognise a leaked one. Only its SHA-256 is stored, next to a short public id
(``tok_…``) used to list and revoke it.
"""

from __future__ import annotations

import secrets
import time

from signoff.server.records import (
    TOKEN_PREFIX,
    ServerDB,
    TokenKind,
    TokenRecord,
    digest,
    new_secret,
)


async def create_token(
    db: ServerDB,
    kind: TokenKind,
    subject: str,
    *,
    trusted_roles: bool = False,
    label: str | None = None,
) -> tuple[str, TokenRecord]:
    """Store a new token; returns the raw token (show it once) and its record."""
    if not subject:
        raise ValueError("a token needs an agent name or an approver id")
    if trusted_roles and kind != "agent":
        raise ValueError("--trusted-roles applies to agent tokens only")
    raw = TOKEN_PREFIX[kind] + new_secret()
    record = TokenRecord(
        id="tok_" + secrets.token_hex(6),
        token_hash=digest(raw),
        kind=kind,
        subject=subject,
        created_at=time.time(),
        trusted_roles=trusted_roles,
        label=label,
    )
    await db.add_token(record)
    return raw, record


async def revoke_token(db: ServerDB, token: str) -> bool:
    """Revoke by public id (``tok_…``) or by the token itself; its browser sessions end too."""
    if token.startswith(tuple(TOKEN_PREFIX.values())):
        record = await db.token_by_hash(digest(token))
        if record is None:
            return False
        token = record.id
    return await db.revoke_token(token, time.time())
