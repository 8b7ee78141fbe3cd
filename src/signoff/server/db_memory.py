"""``MemoryServerDB``: tokens, sessions and links in one process (tests, ``memory://``)."""

from __future__ import annotations

import dataclasses
import secrets
import threading

from signoff.server.records import LinkRecord, SessionRecord, TokenRecord


class MemoryServerDB:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secret = secrets.token_bytes(32)
        self._tokens: dict[str, TokenRecord] = {}
        self._sessions: dict[str, SessionRecord] = {}
        self._links: dict[str, LinkRecord] = {}
        self.token_writes = 0

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def secret(self) -> bytes:
        return self._secret

    async def add_token(self, record: TokenRecord) -> None:
        with self._lock:
            self.token_writes += 1
            self._tokens[record.token_hash] = record

    async def token_by_hash(self, token_hash: str) -> TokenRecord | None:
        return self._tokens.get(token_hash)

    async def list_tokens(self) -> list[TokenRecord]:
        with self._lock:
            return sorted(self._tokens.values(), key=lambda t: t.created_at)

    async def tokens_version(self) -> int:
        return self.token_writes  # one process: its own writes are every change

    async def revoke_token(self, token_id: str, now: float) -> bool:
        with self._lock:
            self.token_writes += 1
            for key, token in self._tokens.items():
                if token.id == token_id and token.active:
                    self._tokens[key] = dataclasses.replace(token, revoked_at=now)
                    self._sessions = {
                        k: s for k, s in self._sessions.items() if s.token_id != token_id
                    }
                    return True
        return False

    async def add_session(self, record: SessionRecord) -> None:
        with self._lock:
            self._sessions[record.id_hash] = record

    async def session_by_hash(self, id_hash: str, now: float) -> SessionRecord | None:
        session = self._sessions.get(id_hash)
        if session is None or session.expires_at <= now:
            return None
        return session

    async def delete_session(self, id_hash: str) -> None:
        with self._lock:
            self._sessions.pop(id_hash, None)

    async def add_link(self, record: LinkRecord) -> None:
        with self._lock:
            self._links[record.token_hash] = record

    async def link_by_hash(self, token_hash: str) -> LinkRecord | None:
        return self._links.get(token_hash)

    async def consume_link(self, token_hash: str, now: float) -> LinkRecord | None:
        with self._lock:
            link = self._links.get(token_hash)
            if link is None or link.used_at is not None or link.expires_at <= now:
                return None
            used = dataclasses.replace(link, used_at=now)
            self._links[token_hash] = used
            return used

    async def release_link(self, token_hash: str) -> None:
        with self._lock:
            link = self._links.get(token_hash)
            if link is not None:
                self._links[token_hash] = dataclasses.replace(link, used_at=None)

    async def burn_links(self, request_id: str, approver: str, now: float) -> int:
        burned = 0
        with self._lock:
            for key, link in self._links.items():
                if (
                    link.request_id == request_id
                    and link.approver == approver
                    and link.used_at is None
                ):
                    self._links[key] = dataclasses.replace(link, used_at=now)
                    burned += 1
        return burned
