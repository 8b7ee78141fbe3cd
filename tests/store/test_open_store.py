"""open_store(url): one URL picks and configures the backend."""

from __future__ import annotations

import sys
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
def test_postgres_urls_give_a_postgres_store(url: str) -> None:
    from signoff.store.postgres import PostgresStore

    store = open_store(url)
    assert isinstance(store, PostgresStore) and isinstance(store, Store)
    assert (store.url, store.dsn, store.schema) == (url, url, "signoff")


def test_postgres_url_options_are_signoffs_and_the_rest_go_to_libpq() -> None:
    from signoff.store.postgres import PostgresStore

    url = (
        "postgresql://u:secret@h:6432/db?sslmode=require&schema=approvals&pool_max=3"
        "&recheck_s=5&direct_host=db.internal&direct_port=5432"
    )
    store = open_store(url)
    assert isinstance(store, PostgresStore)
    assert store.dsn == "postgresql://u:secret@h:6432/db?sslmode=require"
    assert (store.schema, store.pool_max, store.recheck_s) == ("approvals", 3, 5.0)
    assert store.direct == {"host": "db.internal", "port": "5432"}
    assert "secret" not in repr(store) and "secret" not in str(store.stats())
    assert store.url == url.replace(":secret@", ":***@")


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("postgresql://h/db?pool_max=many", "bad postgresql option"),
        ("postgresql://h/db?schema=Robert');DROP", "not a plain lower-case identifier"),
        ("postgresql://h/db?pool_min=5&pool_max=2", "pool_min <= pool_max"),
    ],
)
def test_bad_postgres_options_are_refused(url: str, complaint: str) -> None:
    with pytest.raises(StoreError, match=complaint):
        open_store(url)


def test_postgres_url_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "signoff.store.postgres", None)  # import fails
    with pytest.raises(StoreError, match=r"signoff\[postgres\]") as caught:
        open_store("postgresql://u:secret@localhost/signoff")
    assert "secret" not in str(caught.value)
