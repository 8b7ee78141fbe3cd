"""Two ``signoff serve`` replicas sharing the PostgreSQL notification outbox: every request's
webhook arrives exactly once, whichever replica created it and whichever worker sends it."""

from __future__ import annotations

import base64
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tests.channels.receiver import Receiver
from tests.replicas.conftest import POLICY, Replica, serve, token
from tests.replicas.test_two_replicas import submit

pytestmark = pytest.mark.slow

SECRET = "whsec_" + base64.b64encode(b"r" * 32).decode()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rec = Receiver()
    yield rec
    rec.close()


@pytest.fixture
def hooked(
    config: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Replica, Replica]]:
    """Both replicas post every event to one webhook subscriber and poll the outbox often."""
    monkeypatch.setenv("T_REPLICA_WEBHOOK_SECRET", SECRET)  # inherited by the replicas
    channels = f"""
    channels:
      webhooks:
        - {{url: "{receiver.url}/hook", secret: "${{T_REPLICA_WEBHOOK_SECRET}}"}}
      delivery: {{backoff: 0.05, backoff_cap: 0.2, poll: 0.1}}
    """
    config.write_text(textwrap.dedent(POLICY) + textwrap.dedent(channels) + _store_line(config))
    pair = (serve(config), serve(config))
    yield pair
    for replica in pair:
        replica.stop()


def _store_line(config: Path) -> str:
    return next(line for line in config.read_text().splitlines(True) if line.startswith("store:"))


def test_each_request_is_announced_once_across_two_replicas(
    config: Path,
    hooked: tuple[Replica, Replica],
    receiver: Receiver,
    pg_url: str,
    schema: str,
) -> None:
    a, b = hooked
    agent = token(config, "--agent", "bot")
    with a.client(agent) as on_a, b.client(agent) as on_b:
        ids = {submit(client, f"n{i}") for i, client in enumerate([on_a, on_b] * 15)}
    receiver.wait_for("/hook", len(ids), timeout=30)
    time.sleep(1.0)  # several poll intervals of both workers: a duplicate would show up now
    created = [r for r in receiver.under("/hook") if r.json()["type"] == "approval.created"]
    per_request = Counter(r.json()["data"]["request_id"] for r in created)
    assert set(per_request) == ids
    assert set(per_request.values()) == {1}, per_request
    assert len({r.headers["webhook-id"] for r in created}) == len(created) == 30
    with psycopg.connect(pg_url) as conn:  # the shared outbox did it, not replica memory
        rows = conn.execute(
            sql.SQL("SELECT request_id, status, attempts FROM {}.outbox").format(
                sql.Identifier(schema)
            )
        ).fetchall()
    assert sorted(r[0] for r in rows) == sorted(ids)
    assert {(status, attempts) for _, status, attempts in rows} == {("sent", 1)}
    logs = a.stop() + b.stop()
    assert "no durable outbox" not in logs
