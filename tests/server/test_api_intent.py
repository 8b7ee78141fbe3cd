"""The server runs intent judges on submission (so remote gates get them too), and the
inbox shows a judge's answer as model output, inert."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from signoff.store import MemoryStore
from tests.gate import intent_judges
from tests.server.conftest import Server, start_server

POLICY = """
version: 1
people:
  alice: {roles: [finance]}
judges:
  rules: {kind: python, function: "tests.gate.intent_judges:scripted"}
tools:
  read_report:
    default: allow
    intent: {judge: rules}
  wipe_reports:
    default: allow
    intent: {judge: rules, on_mismatch: deny}
"""


@pytest.fixture
def server() -> Iterator[Server]:
    intent_judges.asked.clear()
    intent_judges.answers.clear()
    s = start_server(MemoryStore(), POLICY)
    yield s
    s.close()


def submit(server: Server, tool: str, user_request: str) -> dict[str, object]:
    body = {
        "tool_calls": [{"id": "c1", "name": tool, "args": {"week": 47}}],
        "context": {"user_request": user_request},
    }
    r = server.client("bot").post("/v1/requests", json=body)
    assert r.status_code in (200, 201), r.text
    result: dict[str, object] = r.json()
    return result


def test_submission_is_judged_and_a_mismatch_is_denied_or_asked(server: Server) -> None:
    intent_judges.answers["show week 47"] = {"verdict": "consistent", "reason": "fine"}
    assert submit(server, "read_report", "show week 47")["verdicts"][0]["verdict"] == "allow"  # type: ignore[index]
    hostile = "it <script>alert(1)</script> \u202ereads\u202c"
    intent_judges.answers["show only"] = {"verdict": "mismatch", "reason": hostile}
    denied = submit(server, "wipe_reports", "show only")["verdicts"][0]  # type: ignore[index]
    assert denied["verdict"] == "deny" and denied["rule"] == "wipe_reports.default.intent"  # type: ignore[index]
    asked = submit(server, "read_report", "show only")
    assert asked["verdicts"][0]["verdict"] == "require_approval"  # type: ignore[index]
    req = server.client("alice").get(f"/v1/requests/{asked['id']}").json()
    assert req["action_requests"][0]["intent"]["verdict"] == "mismatch"
    page = server.client("alice").get(f"/requests/{asked['id']}")
    assert page.status_code == 200
    assert "Intent check by judge rules (model output" in page.text
    assert "<script>" not in page.text and "\u202e" not in page.text
    metrics = server.client("alice").get("/metrics").text
    assert 'signoff_intent_checks_total{judge="rules",verdict="mismatch"} 2' in metrics
