"""Two ``signoff serve`` replicas behind one PostgreSQL database, as behind a load balancer:
an agent parked on one is woken by a decision taken on the other, and deadlines are swept
exactly once between them. (Notifications sent once across replicas — the shared outbox — are
tested in ``test_replica_outbox.py``.)"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg import sql

from tests.replicas.conftest import Replica, token

pytestmark = pytest.mark.slow


def submit(client: httpx.Client, call_id: str, tool: str = "transfer_funds") -> str:
    body = {
        "tool_calls": [{"id": call_id, "name": tool, "args": {"amount": 50_000, "to": "ACME"}}],
        "context": {"principal": {"id": "frank"}, "thread": f"t-{call_id}"},
    }
    answer = client.post("/v1/requests", json=body)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def test_agent_waiting_on_one_replica_is_woken_by_a_decision_on_the_other(
    config: Path, replicas: tuple[Replica, Replica]
) -> None:
    a, b = replicas
    agent, bob = token(config, "--agent", "bot"), token(config, "--approver", "bob")
    with a.client(agent, timeout=60) as on_a, b.client(bob) as on_b:
        request_id = submit(on_a, "c1")
        answers: list[tuple[int, dict[str, object], float]] = []

        def long_poll() -> None:
            started = time.monotonic()
            reply = on_a.get(f"/v1/requests/{request_id}/wait", params={"timeout": 50})
            answers.append((reply.status_code, reply.json(), time.monotonic() - started))

        waiting = threading.Thread(target=long_poll)
        waiting.start()
        time.sleep(0.5)  # the agent is parked on replica A
        assert not answers
        decided = on_b.post(
            f"/v1/requests/{request_id}/decisions", json={"decisions": [{"type": "approve"}]}
        )
        assert decided.status_code == 200, decided.text
        waiting.join(60)
    ((status, body, waited),) = answers
    assert (status, body["status"]) == (200, "resolved")
    assert body["decisions"][0]["approver"] == "bob"  # type: ignore[index]
    assert waited < 50, "the long-poll ran out instead of being woken"


def test_two_replicas_sweep_each_deadline_exactly_once(
    config: Path, pg_url: str, schema: str, replicas: tuple[Replica, Replica]
) -> None:
    agent = token(config, "--agent", "bot")
    ids = []
    with replicas[0].client(agent) as on_a, replicas[1].client(agent) as on_b:
        for i in range(40):  # 2-second deadlines, nobody decides
            ids.append(submit(on_a if i % 2 else on_b, f"q{i}", "quick_transfer"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            states = [on_a.get(f"/v1/requests/{rid}").json()["status"] for rid in ids]
            if set(states) == {"expired"}:
                break
            time.sleep(0.2)
    assert set(states) == {"expired"}
    s = sql.Identifier(schema)
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            sql.SQL("SELECT request_id, origin FROM {}.audit WHERE event = 'expired'").format(s)
        ).fetchall()
    per_request = Counter(rid for rid, _ in rows)
    assert per_request == dict.fromkeys(ids, 1)  # never twice, never zero
    print("expiries per replica:", Counter(origin for _, origin in rows))
