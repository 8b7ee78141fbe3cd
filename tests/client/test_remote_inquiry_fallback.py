"""The inquiry fallback (``inquiries.fallback``) seen through ``RemoteGate``: an agent that
asks over HTTP gets the judge's answer, marked as model output, exactly as an in-process
``Gate.ask`` does (tests/gate/test_inquiry_fallback.py). Real server on loopback, python
judge, the server gate's own sweeper timer."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest

from signoff.client import RemoteGate
from signoff.model import ApprovalRequest
from signoff.store import MemoryStore
from tests.gate import inquiry_judges
from tests.gate.test_inquiry_fallback import FALLBACK as GATE_FALLBACK
from tests.gate.test_inquiry_fallback import JUDGES, wait_for_fallback
from tests.server.conftest import POLICY, Server, start_server

FALLBACK = textwrap.dedent(JUDGES) + textwrap.dedent(GATE_FALLBACK)


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    inquiry_judges.reset()
    yield
    inquiry_judges.release.set()


@pytest.fixture
def server() -> Iterator[Server]:
    srv = start_server(MemoryStore(), textwrap.dedent(POLICY) + FALLBACK)
    yield srv
    srv.close()


@pytest.fixture
def remote(server: Server) -> Iterator[RemoteGate]:
    gate = RemoteGate(server.url, server.tokens["bot"], poll_timeout=5)
    yield gate
    gate.close()


def test_a_remote_ask_gets_the_judges_answer(remote: RemoteGate) -> None:
    answer = remote.ask("Deploy to which region?", choices=["eu", "us"], timeout=60)
    assert answer == "eu"
    (question, _ctx) = inquiry_judges.asked[0]
    assert question.question == "Deploy to which region?"


def test_the_remote_request_says_a_judge_answered(remote: RemoteGate) -> None:
    req = remote.ask("Deploy to which region?", choices=["eu", "us"], timeout=60, wait=False)
    assert isinstance(req, ApprovalRequest)
    assert req.fallback is not None and req.fallback.judge == "rules"
    done = remote.wait(req.id, timeout=30)
    call = done.calls[0]
    assert (call.resolution, call.message, call.resolved_by) == ("responded", "eu", "judge:rules")
    assert done.fallback is not None and done.fallback.state == "answered"


def test_a_remote_form_is_answered_per_question(remote: RemoteGate) -> None:
    questions = [
        {"id": "region", "question": "Region?", "choices": ["eu", "us"]},
        {"id": "envs", "question": "Which?", "choices": ["a", "b", "c"], "multiple": True},
    ]
    inquiry_judges.answers["Release"] = {"answers": {"region": "us", "envs": ["a", "c"]}}
    answers = remote.ask("Release", questions=questions, timeout=60)
    assert answers == {"region": "us", "envs": ["a", "c"]}


def test_a_failed_fallback_leaves_the_remote_inquiry_for_a_human(
    server: Server, remote: RemoteGate
) -> None:
    inquiry_judges.answers["Deploy to which region?"] = "mars"  # not one of the choices
    req = remote.ask("Deploy to which region?", choices=["eu", "us"], timeout=60, wait=False)
    assert isinstance(req, ApprovalRequest)
    failed = wait_for_fallback(server.gate, req, "failed")
    assert failed.pending
    decided = server.client("alice").post(
        f"/v1/requests/{req.id}/decisions", json=[{"type": "respond", "message": "us"}]
    )
    assert decided.status_code == 200, decided.text
    done = remote.wait(req.id, timeout=30)
    assert (done.calls[0].message, done.calls[0].resolved_by) == ("us", "alice")
