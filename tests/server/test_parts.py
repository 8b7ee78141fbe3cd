"""The server's parts on their own: settings, redaction, the server tables, log redaction."""

from __future__ import annotations

import asyncio
import logging
import re
import sqlite3
import time
from pathlib import Path

import pytest

from signoff import PolicyError
from signoff.client.settings import remote_settings
from signoff.server.db_sqlite import SQLiteServerDB
from signoff.server.presenter import REDACTED, redact
from signoff.server.records import LinkRecord, SessionRecord
from signoff.server.runner import RedactLinkTokens
from signoff.server.settings import ServerSettings
from signoff.server.tokens import create_token, revoke_token
from signoff.store import SQLiteStore


def test_settings_defaults() -> None:
    settings = ServerSettings.from_sections({})
    assert (settings.serve.host, settings.serve.port) == ("127.0.0.1", 8765)
    assert settings.auth.session_ttl == 12 * 3600 and settings.auth.trusted_proxy is None


def test_settings_errors_name_the_key() -> None:
    with pytest.raises(PolicyError) as info:
        ServerSettings.from_sections({"serve": {"port": 70000}})
    assert info.value.path == "signoff.yaml.serve.port"
    with pytest.raises(PolicyError, match=r"serve\.public_url"):
        ServerSettings.from_sections({"serve": {"public_url": "ftp://x"}})
    with pytest.raises(PolicyError, match=r"auth\.session_ttl"):
        ServerSettings.from_sections({"auth": {"session_ttl": "ten minutes"}})
    with pytest.raises(PolicyError, match="trusted_proxy"):
        ServerSettings.from_sections({"auth": {"trusted_proxy": {"addresses": ["not-an-ip"]}}})
    with pytest.raises(PolicyError, match=r"unknown|extra|not permitted"):
        ServerSettings.from_sections({"ui": {"colour": "red"}})


def test_remote_token_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_TOKEN", "so_agent_x")
    settings = remote_settings({"url": "https://s.example/", "token": "${MY_TOKEN}"})
    assert settings.token == "so_agent_x" and settings.url == "https://s.example"
    monkeypatch.delenv("MY_TOKEN")
    with pytest.raises(PolicyError, match="MY_TOKEN is not set"):
        remote_settings({"url": "https://s.example", "token": "${MY_TOKEN}"})


def test_secrets_are_redacted_at_any_depth() -> None:
    pattern = ServerSettings.from_sections({}).ui.redactor()
    value = {"user": "bob", "API_KEY": "k", "db": {"Password": "p", "hosts": [{"token": "t"}]}}
    assert redact(value, pattern) == {
        "user": "bob",
        "API_KEY": REDACTED,
        "db": {"Password": REDACTED, "hosts": [{"token": REDACTED}]},
    }
    custom = ServerSettings.from_sections({"ui": {"redact_keys": ["^iban$"]}}).ui.redactor()
    assert redact({"iban": "DE..", "password": "p"}, custom) == {"iban": REDACTED, "password": "p"}


def test_link_tokens_are_redacted_in_access_logs() -> None:
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        "",
        0,
        '%s - "%s %s HTTP/%s" %d',
        ("1.2.3.4", "GET", "/a/req_1?t=SECRET&x=1", "1.1", 200),
        None,
    )
    RedactLinkTokens().filter(record)
    assert "SECRET" not in record.getMessage() and "t=[redacted]&x=1" in record.getMessage()


def test_server_tables_live_beside_the_store_and_keep_only_hashes(tmp_path: Path) -> None:
    path = tmp_path / "signoff.db"

    async def scenario() -> tuple[str, bytes]:
        store = SQLiteStore(path)
        await store.open()
        db = SQLiteServerDB(str(path))
        await db.open()
        raw, record = await create_token(db, "approver", "alice")
        now = time.time()
        await db.add_session(SessionRecord("h1", "alice", now, now + 60, record.id))
        await db.add_link(LinkRecord("l1", "review", "alice", now, now + 60, "req_1"))
        assert (await db.consume_link("l1", now)) is not None
        assert (await db.consume_link("l1", now)) is None  # single use
        await db.release_link("l1")
        assert (await db.consume_link("l1", now)) is not None
        assert await db.session_by_hash("h1", now) is not None
        assert await revoke_token(db, record.id)
        assert await db.session_by_hash("h1", now) is None  # revoking ends sessions
        secret = await db.secret()
        await db.close()
        again = SQLiteServerDB(str(path))
        await again.open()  # migrations are idempotent; the secret survives
        assert await again.secret() == secret
        await again.close()
        await store.close()
        return raw, secret

    raw, _ = asyncio.run(scenario())
    with sqlite3.connect(path) as conn:
        dump = "\n".join(conn.iterdump())
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert raw not in dump and re.search(r"so_appr_", dump) is None
    assert {"requests", "audit", "signoff_server_tokens", "signoff_server_links"} <= tables
