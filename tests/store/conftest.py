"""Store fixtures. ``store`` runs each contract test once per backend in ``BACKENDS``.

A new backend (PostgreSQL) adds one entry: a factory taking the test's tmp_path and the
test's pytest request (to skip when its server is unavailable), and a reopen function.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from signoff.store import MemoryStore, SQLiteStore, Store


@dataclass(frozen=True)
class Backend:
    make: Callable[[Path], Store]
    reopen: Callable[[Store], Awaitable[Store]]


async def _reopen_memory(store: Store) -> Store:
    await store.open()  # a MemoryStore keeps its data in the object
    return store


async def _reopen_sqlite(store: Store) -> Store:
    assert isinstance(store, SQLiteStore)
    fresh = SQLiteStore(store.path)
    await fresh.open()
    return fresh


BACKENDS: dict[str, Backend] = {
    "memory": Backend(lambda tmp: MemoryStore(), _reopen_memory),
    "sqlite": Backend(lambda tmp: SQLiteStore(tmp / "signoff.db"), _reopen_sqlite),
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> Backend:
    return BACKENDS[request.param]


@pytest.fixture
async def store(backend: Backend, tmp_path: Path) -> AsyncIterator[Store]:
    opened = backend.make(tmp_path)
    await opened.open()
    yield opened
    await opened.close()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    opened = SQLiteStore(tmp_path / "signoff.db")
    await opened.open()
    yield opened
    await opened.close()
