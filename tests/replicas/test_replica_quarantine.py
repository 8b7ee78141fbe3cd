"""Two ``signoff serve`` replicas on one PostgreSQL database with a poison row in it: both
start although the row is due, it is quarantined once (one audit event, one mark every
replica sees), and neither replica's lists, metrics or sweeps trip over it."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from signoff.store.postgres import PostgresStore
from tests.replicas.conftest import Replica, serve, token
from tests.store.factories import created_events, make_request

pytestmark = pytest.mark.slow


def gauge(replica: Replica, name: str) -> int:
    text = httpx.get(f"{replica.url}/metrics").text
    match = re.search(rf"^{name} (\d+)$", text, re.MULTILINE)
    assert match, text
    return int(match.group(1))


async def seed(pg_url: str, schema: str) -> tuple[str, str, str]:
    """A readable due request, a due request nested 250 deep, a readable pending one."""
    due = make_request(thread="t-due", timeout_s=-5)
    bad = make_request(thread="t-bad", timeout_s=-10)
    attrs: dict[str, Any] = {}
    for _ in range(250):
        attrs = {"a": attrs}
    bad.attrs = attrs
    waiting = make_request(thread="t-waiting")
    async with PostgresStore(pg_url, schema=schema) as store:
        for request in (due, bad, waiting):
            await store.create_request(request, created_events(request))
    return due.id, bad.id, waiting.id


async def audit_of(pg_url: str, schema: str, request_id: str) -> list[str]:
    async with PostgresStore(pg_url, schema=schema) as store:
        return [r.event for r in await store.read_audit() if r.request_id == request_id]


def test_replicas_start_past_a_due_poison_row_and_quarantine_it_once(
    pg_url: str, schema: str, config: Path
) -> None:
    due, bad, waiting = asyncio.run(seed(pg_url, schema))
    replicas = [serve(config), serve(config)]  # start-up sweeps: the bad row is due
    try:
        bob = token(config, "--approver", "bob")
        for replica in replicas:
            with replica.client(bob) as client:
                assert client.get(f"/v1/requests/{due}").json()["status"] == "expired"
                listed = client.get("/v1/requests", params={"status": "pending"})
                assert [r["id"] for r in listed.json()["requests"]] == [waiting]
                answer = client.get(f"/v1/requests/{bad}")
                assert answer.status_code == 409 and answer.json()["error"] == "quarantined"
            assert gauge(replica, "signoff_quarantined_requests") == 1
            assert gauge(replica, "signoff_pending_requests") == 1
        time.sleep(1.5)  # a few more sweeps on both replicas
        assert all(r.process.poll() is None for r in replicas)
    finally:
        logs = [replica.stop() for replica in replicas]
    assert asyncio.run(audit_of(pg_url, schema, bad)) == ["created", "quarantined"]
    assert sum(log.count("cannot be read and is quarantined") for log in logs) >= 1
