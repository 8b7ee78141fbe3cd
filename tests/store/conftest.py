"""Store fixtures. ``store`` runs each contract test once per backend in ``BACKENDS``.

A backend is a factory taking the test's tmp_path and pytest request (PostgreSQL asks it
for the ``pg_url`` fixture), a reopen function, and a cleanup run after the test.

PostgreSQL: ``TEST_PG_DSN`` if set, else a throwaway cluster started once per test run
(:mod:`tests.store.pg_cluster`); each test gets a schema of its own, dropped afterwards.
Without the server binaries the fixture fails (it does not skip) and says how to install them.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from signoff.store import MemoryStore, SQLiteStore, Store
from signoff.store.postgres import PostgresStore
from tests.store import pg_cluster


@dataclass(frozen=True)
class Backend:
    make: Callable[[Path, pytest.FixtureRequest], Store]
    reopen: Callable[[Store], Awaitable[Store]]
    cleanup: Callable[[Store], None] = lambda store: None


async def _reopen_memory(store: Store) -> Store:
    await store.open()  # a MemoryStore keeps its data in the object
    return store


async def _reopen_sqlite(store: Store) -> Store:
    assert isinstance(store, SQLiteStore)
    fresh = SQLiteStore(store.path)
    await fresh.open()
    return fresh


def _make_postgres(tmp: Path, request: pytest.FixtureRequest) -> Store:
    url = request.getfixturevalue("pg_url")
    return PostgresStore(url, schema=f"t_{secrets.token_hex(6)}", pool_max=4)


async def _reopen_postgres(store: Store) -> Store:
    assert isinstance(store, PostgresStore)
    fresh = PostgresStore(store.dsn, schema=store.schema, pool_max=4)
    await fresh.open()
    return fresh


def _drop_postgres(store: Store) -> None:
    assert isinstance(store, PostgresStore)
    pg_cluster.drop_schema(store.dsn, store.schema)


BACKENDS: dict[str, Backend] = {
    "memory": Backend(lambda tmp, request: MemoryStore(), _reopen_memory),
    "sqlite": Backend(lambda tmp, request: SQLiteStore(tmp / "signoff.db"), _reopen_sqlite),
    "postgresql": Backend(_make_postgres, _reopen_postgres, _drop_postgres),
}


@pytest.fixture(scope="session")
def pg_url(request: pytest.FixtureRequest) -> str:
    """A PostgreSQL URL for the whole run (superuser on a throwaway cluster)."""
    try:
        url, started = pg_cluster.shared_url()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    if started is not None:
        request.config.add_cleanup(started.stop)
    return url


@pytest.fixture
async def pg_store(pg_url: str) -> AsyncIterator[PostgresStore]:
    """A fresh PostgresStore in a schema of its own."""
    opened = PostgresStore(pg_url, schema=f"t_{secrets.token_hex(6)}", pool_max=4)
    await opened.open()
    yield opened
    await opened.close()
    pg_cluster.drop_schema(pg_url, opened.schema)


@pytest.fixture
async def second(pg_store: PostgresStore) -> AsyncIterator[PostgresStore]:
    """Another store on ``pg_store``'s schema: a second replica."""
    other = PostgresStore(pg_store.dsn, schema=pg_store.schema, pool_max=4)
    await other.open()
    yield other
    await other.close()


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> Backend:
    return BACKENDS[request.param]


@pytest.fixture
async def store(
    backend: Backend, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Store]:
    opened = backend.make(tmp_path, request)
    await opened.open()
    yield opened
    await opened.close()
    backend.cleanup(opened)


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    opened = SQLiteStore(tmp_path / "signoff.db")
    await opened.open()
    yield opened
    await opened.close()
