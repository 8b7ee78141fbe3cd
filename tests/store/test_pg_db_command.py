"""``signoff db upgrade`` / ``signoff db status`` against PostgreSQL (and SQLite)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from signoff.cli import app
from signoff.store._pg_schema import SCHEMA_VERSION
from tests.store.pg_cluster import drop_schema

runner = CliRunner()


@pytest.fixture
def config(pg_url: str, tmp_path: Path) -> Iterator[Path]:
    schema = f"cli_{secrets.token_hex(4)}"
    path = tmp_path / "signoff.yaml"
    path.write_text(f"version: 1\nstore: {pg_url}?schema={schema}\ntools: {{}}\n")
    yield path
    drop_schema(pg_url, schema)


def test_upgrade_creates_the_schema_and_then_has_nothing_to_do(config: Path) -> None:
    before = runner.invoke(app, ["db", "status", "-c", str(config), "--json"])
    assert before.exit_code == 0, before.output
    assert json.loads(before.output)["version"] == 0
    first = runner.invoke(app, ["db", "upgrade", "-c", str(config)])
    assert first.exit_code == 0, first.output
    assert f"migrated to version {SCHEMA_VERSION}" in first.output
    again = runner.invoke(app, ["db", "upgrade", "-c", str(config), "--json"])
    assert json.loads(again.output)["applied"] == []
    after = runner.invoke(app, ["db", "status", "-c", str(config)])
    assert "up to date" in after.output


def test_an_unreachable_database_is_a_clear_error_without_the_password() -> None:
    from tests.store.pg_cluster import free_port

    url = f"postgresql://owner:s3cret@127.0.0.1:{free_port()}/x?timeout_s=1"
    result = runner.invoke(app, ["db", "upgrade", "--store", url])
    assert result.exit_code == 1
    assert "cannot connect" in result.output and "s3cret" not in result.output


def test_sqlite_stores_report_their_version(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    assert "version 0" in runner.invoke(app, ["db", "status", "--store", url]).output
    assert runner.invoke(app, ["db", "upgrade", "--store", url]).exit_code == 0
    assert "up to date" in runner.invoke(app, ["db", "status", "--store", url]).output
