"""Active bearer tokens kept in memory, so a request's token check does not read the store.

Every API request carries a bearer token; looking it up in the store was a read on the event
loop per request (three per approval cycle). The cache keeps the *active* token records it has
seen, keyed by the token's SHA-256 (never the token), and stays exact within a bound:

- a token created or revoked through this process's database object applies at once
  (``ServerDB.token_writes`` moves after the write commits, and the next check drops the cache);
- a change made by any other process or replica (``signoff token revoke`` while the server runs)
  applies within ``refresh`` seconds (0.5 s): the cache re-reads one version row that a database
  trigger bumps on every change to the tokens table, at most once per ``refresh``, and drops
  everything when it moved — the rule grants already follow.

Unknown and revoked tokens are never cached: each one is looked up again (a new token works at
once, and a refused one stays refused).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from signoff.server.records import ServerDB, TokenRecord

REFRESH_SECONDS = 0.5
MAX_ENTRIES = 4096


class TokenCache:
    def __init__(
        self,
        db: ServerDB,
        *,
        refresh: float = REFRESH_SECONDS,
        max_entries: int = MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.db = db
        self.refresh = refresh
        self.max_entries = max_entries
        self.clock = clock
        self._entries: dict[str, TokenRecord] = {}
        self._version: int | None = None
        self._writes = -1  # the db's token_writes the entries were read under
        self._checked = float("-inf")
        self._drops = 0  # bumped whenever the entries are dropped

    async def get(self, token_hash: str) -> TokenRecord | None:
        """The token's record as the store has it (active or revoked), or None if unknown."""
        await self._check()
        record = self._entries.get(token_hash)
        if record is not None:
            return record
        drops, writes = self._drops, self._writes
        record = await self.db.token_by_hash(token_hash)
        # Keep it only if nothing changed while it was being read: a record read just before a
        # revocation committed must not outlive the drop that revocation caused.
        if (
            record is not None
            and record.active
            and drops == self._drops
            and writes == self.db.token_writes
        ):
            if len(self._entries) >= self.max_entries:
                del self._entries[next(iter(self._entries))]  # the oldest
            self._entries[token_hash] = record
        return record

    async def _check(self) -> None:
        writes = self.db.token_writes
        now = self.clock()
        if writes == self._writes and now < self._checked + self.refresh:
            return
        local_change = writes != self._writes
        self._checked, self._writes = now, writes  # concurrent requests do not read it again
        try:
            version = await self.db.tokens_version()
        except BaseException:
            self._drop()  # unconfirmed entries are not used: the next request asks again
            self._checked = float("-inf")
            raise
        if local_change or version != self._version or writes != self.db.token_writes:
            self._drop()
            self._version = version

    def _drop(self) -> None:
        self._entries.clear()
        self._drops += 1
