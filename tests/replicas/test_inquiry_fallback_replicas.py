"""The inquiry fallback runs once across gates sharing one PostgreSQL database: two gates,
each with its own store connection and sweeper, race for every due fallback; the judge is
asked once per inquiry and one answer is recorded."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from signoff import Gate, Policy
from signoff.model import ApprovalRequest
from signoff.store import AuditQuery
from tests.gate import inquiry_judges
from tests.gate.test_inquiry_fallback import policy_text

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    inquiry_judges.reset()
    yield


def test_two_sweepers_answer_each_inquiry_once(pg_url: str, schema: str) -> None:
    text = policy_text(
        "inquiries:\n  fallback: {judge: rules, after: 0.3s}\n",
        store=f"{pg_url}?schema={schema}",
    )
    with Gate(Policy.from_yaml(text)) as a, Gate(Policy.from_yaml(text)) as b:
        asked = []
        for i in range(6):
            gate = a if i % 2 else b
            req = gate.ask(
                f"Which region for job {i}?", choices=["eu", "us"], wait=False, timeout=60
            )
            assert isinstance(req, ApprovalRequest)
            asked.append(req)
        done = [a._portal.run(a.await_request(r.id, timeout=60)) for r in asked]

        async def events() -> list[object]:
            await a.store.flush_audit()
            return list(await a.store.read_audit(AuditQuery()))

        log = a._portal.run(events())
    assert all(r.calls[0].resolved_by == "judge:rules" for r in done)
    questions = Counter(q.question for q, _ctx in inquiry_judges.asked)
    assert questions == Counter(f"Which region for job {i}?" for i in range(6))
    per_request = Counter(
        (e.event, e.request_id)  # type: ignore[attr-defined]
        for e in log
        if e.event in ("fallback_asked", "decided")  # type: ignore[attr-defined]
    )
    assert set(per_request.values()) == {1}
    assert len(per_request) == 12
