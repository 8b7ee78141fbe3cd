"""open_store(url): one URL picks and configures the backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from signoff.model import StoreError
from signoff.store import MemoryStore, SQLiteStore, Store, open_store


def test_memory_url_gives_a_memory_store() -> None:
    store = open_store("memory://")
    assert isinstance(store, MemoryStore) and isinstance(store, Store)


def test_sqlite_url_with_three_slashes_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///data/signoff.db")
    assert isinstance(store, SQLiteStore)
    assert store.path == str(tmp_path / "data" / "signoff.db")


def test_sqlite_url_with_four_slashes_is_absolute(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/abs.db")
    assert isinstance(store, SQLiteStore)
    assert store.path == f"{tmp_path}/abs.db"
    assert store.url == f"sqlite:///{tmp_path}/abs.db"


def test_sqlite_url_options_configure_the_store(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/x.db?synchronous=normal&busy_timeout_ms=250")
    assert isinstance(store, SQLiteStore)
    assert (store.synchronous, store.busy_timeout_ms) == ("NORMAL", 250)


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("sqlite:///x.db?synchronous=off", "synchronous must be one of"),
        ("sqlite:///x.db?journal=delete", "unknown sqlite option journal"),
        ("sqlite:///x.db?busy_timeout_ms=soon", "bad sqlite option"),
        ("sqlite://", "needs a file path"),
        ("sqlite:///:memory:", "use memory://"),
        ("sqlite://host/x.db", "names a host"),
        ("signoff.db", "no scheme"),
        ("redis://localhost", "unknown store URL scheme"),
    ],
)
def test_bad_store_urls_are_refused_with_a_hint(url: str, complaint: str) -> None:
    with pytest.raises(StoreError, match=complaint):
        open_store(url)


@pytest.mark.parametrize("url", ["postgresql://localhost/signoff", "postgres://u@h/db"])
def test_postgres_urls_point_to_the_extra(url: str) -> None:
    with pytest.raises(StoreError, match=r"signoff\[postgres\]"):
        open_store(url)
