"""The bearer-token cache: hits skip the store, and a revocation is never outlived.

In this process a revocation applies at once; made by another process (its own database
object and connection on the same file, as ``signoff token revoke`` is) it applies at the
next version check, at most ``refresh`` seconds later. The clock is a fake one, stepped by the
test, so the bound is proved without timing anything.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from signoff.server.db_memory import MemoryServerDB
from signoff.server.db_sqlite import _MIGRATIONS, SQLiteServerDB
from signoff.server.records import TokenRecord, digest
from signoff.server.token_cache import TokenCache
from signoff.server.tokens import create_token, revoke_token


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Counting(SQLiteServerDB):
    """The real SQLite tables, counting the token reads that reach them."""

    reads = 0

    async def token_by_hash(self, token_hash: str) -> TokenRecord | None:
        self.reads += 1
        return await super().token_by_hash(token_hash)


@pytest.fixture
def file(tmp_path: Path) -> Path:
    return tmp_path / "signoff.db"


async def opened(db: SQLiteServerDB) -> SQLiteServerDB:
    await db.open()
    return db


async def test_hits_skip_the_store_and_unknown_tokens_are_not_cached(file: Path) -> None:
    db = await opened(Counting(str(file)))
    cache = TokenCache(db, clock=Clock())
    raw, record = await create_token(db, "agent", "bot")
    for _ in range(5):
        assert await cache.get(digest(raw)) == record
    assert db.reads == 1
    for _ in range(3):
        assert await cache.get(digest("so_agent_nobody")) is None
    assert db.reads == 4  # every unknown token is asked again
    await db.close()


async def test_a_revocation_in_this_process_applies_at_once(file: Path) -> None:
    db = await opened(SQLiteServerDB(str(file)))
    cache = TokenCache(db, clock=Clock())  # the clock never moves: no refresh helps
    raw, record = await create_token(db, "approver", "bob")
    assert (await cache.get(digest(raw))) == record
    assert await revoke_token(db, record.id)
    revoked = await cache.get(digest(raw))
    assert revoked is not None and not revoked.active
    assert (await cache.get(digest(raw))) == revoked  # a revoked record is never served active
    await db.close()


async def test_another_process_revokes_within_the_refresh(file: Path) -> None:
    db = await opened(SQLiteServerDB(str(file)))
    cli = await opened(SQLiteServerDB(str(file)))  # `signoff token revoke`: its own connection
    clock = Clock()
    cache = TokenCache(db, refresh=0.5, clock=clock)
    raw, record = await create_token(cli, "agent", "bot")
    assert (await cache.get(digest(raw))) == record  # created elsewhere: works at once
    assert await revoke_token(cli, record.id)
    clock.now += 0.49
    cached = await cache.get(digest(raw))
    assert cached is not None and cached.active  # the documented bound: up to `refresh` late
    clock.now += 0.01
    refused = await cache.get(digest(raw))
    assert refused is not None and not refused.active
    await cli.close()
    await db.close()


async def test_any_writer_moves_the_version_even_raw_sql(file: Path) -> None:
    db = await opened(SQLiteServerDB(str(file)))
    _, record = await create_token(db, "agent", "bot")
    before = await db.tokens_version()
    with sqlite3.connect(file) as conn:  # an old tool, a DBA: no signoff code at all
        conn.execute("UPDATE signoff_server_tokens SET revoked_at = 1 WHERE id = ?", (record.id,))
    assert await db.tokens_version() == before + 1
    with sqlite3.connect(file) as conn:
        conn.execute("DELETE FROM signoff_server_tokens")
    assert await db.tokens_version() == before + 2
    await db.close()


async def test_a_record_read_while_a_revocation_commits_is_not_kept(file: Path) -> None:
    """The read saw the token active, the revocation committed before the read returned: the
    cache must not keep what it read (it would outlive the drop the revocation caused)."""
    revoke_during_read: list[str] = []

    class Racing(SQLiteServerDB):
        async def token_by_hash(self, token_hash: str) -> TokenRecord | None:
            record = await super().token_by_hash(token_hash)
            if revoke_during_read:
                await super().revoke_token(revoke_during_read.pop(), time.time())
            return record

    db = await opened(Racing(str(file)))
    cache = TokenCache(db, clock=Clock())
    raw, record = await create_token(db, "agent", "bot")
    revoke_during_read.append(record.id)
    first = await cache.get(digest(raw))
    assert first is not None and first.active  # read before the revocation: that is its answer
    again = await cache.get(digest(raw))
    assert again is not None and not again.active
    await db.close()


async def test_a_failed_version_read_fails_closed_and_is_retried(file: Path) -> None:
    db = await opened(SQLiteServerDB(str(file)))
    clock = Clock()
    cache = TokenCache(db, clock=clock)
    raw, record = await create_token(db, "agent", "bot")
    assert (await cache.get(digest(raw))) == record
    with sqlite3.connect(file) as conn:
        conn.execute("ALTER TABLE signoff_server_token_changes RENAME TO moved")
    clock.now += 1
    with pytest.raises(Exception, match="no such table"):
        await cache.get(digest(raw))
    with pytest.raises(Exception, match="no such table"):
        await cache.get(digest(raw))  # asked again, never answered from the old entries
    with sqlite3.connect(file) as conn:
        conn.execute("ALTER TABLE moved RENAME TO signoff_server_token_changes")
    assert (await cache.get(digest(raw))) == record
    await db.close()


async def test_the_cache_is_bounded() -> None:
    db = MemoryServerDB()
    cache = TokenCache(db, max_entries=3, clock=Clock())
    raws = [(await create_token(db, "agent", f"bot{i}"))[0] for i in range(5)]
    for raw in raws:
        assert await cache.get(digest(raw)) is not None
    assert len(cache._entries) == 3
    assert digest(raws[0]) not in cache._entries and digest(raws[-1]) in cache._entries


async def test_an_old_file_is_migrated_and_its_tokens_keep_working(file: Path) -> None:
    with sqlite3.connect(file) as conn:  # the server tables as version 1 left them
        conn.execute("CREATE TABLE signoff_server_meta (key TEXT PRIMARY KEY, value TEXT)")
        for statement in _MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("INSERT INTO signoff_server_meta VALUES ('schema_version', '1')")
        conn.execute("INSERT INTO signoff_server_meta VALUES ('secret', ?)", ("ab" * 32,))
        conn.execute(
            "INSERT INTO signoff_server_tokens (id, token_hash, kind, subject, created_at) "
            "VALUES ('tok_old', ?, 'agent', 'bot', 1)",
            (digest("so_agent_old"),),
        )
    db = await opened(SQLiteServerDB(str(file)))
    assert await db.secret() == bytes.fromhex("ab" * 32)
    clock = Clock()
    cache = TokenCache(db, clock=clock)
    old = await cache.get(digest("so_agent_old"))
    assert old is not None and old.active
    with sqlite3.connect(file) as conn:
        conn.execute("UPDATE signoff_server_tokens SET revoked_at = 2")
    clock.now += 1
    gone = await cache.get(digest("so_agent_old"))
    assert gone is not None and not gone.active
    await db.close()
