"""``RemoteGate``: the Gate API over HTTP, against a real server."""

from __future__ import annotations

import asyncio
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from signoff import (
    AlreadyDecided,
    AlreadyExecuted,
    Denied,
    Gate,
    Policy,
    PolicyError,
    Rejected,
    ToolCall,
)
from signoff.client import RemoteGate, Unauthorized
from signoff.client.http import ServerUnavailable
from signoff.model import ApprovalRequest, SignoffError
from signoff.server import ServerThread, create_app
from signoff.store import MemoryStore, SQLiteStore
from tests.server.conftest import POLICY, Server, start_server


@pytest.fixture
def server() -> Iterator[Server]:
    srv = start_server(MemoryStore())
    yield srv
    srv.close()


@pytest.fixture
def remote(server: Server) -> Iterator[RemoteGate]:
    gate = RemoteGate(server.url, server.tokens["bot"], poll_timeout=5)
    yield gate
    gate.close()


def on_created(server: Server) -> list[ApprovalRequest]:
    """Requests as they are created (the store's listener, no polling)."""
    created: list[ApprovalRequest] = []
    ready = threading.Event()

    def listener(req: ApprovalRequest, event: str) -> None:
        if event == "created":
            created.append(req)
            ready.set()

    server.gate.store.add_listener(listener)
    created_ready[id(created)] = ready
    return created


created_ready: dict[int, threading.Event] = {}


def wait_created(created: list[ApprovalRequest]) -> ApprovalRequest:
    assert created_ready[id(created)].wait(20)
    return created[-1]


def decide(server: Server, who: str, rid: str, decision: dict[str, Any]) -> None:
    r = server.client(who).post(f"/v1/requests/{rid}/decisions", json=[decision])
    assert r.status_code == 200, r.text


def in_thread(fn: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except Exception as exc:
            out.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def test_guard_runs_an_allowed_call_at_once(remote: RemoteGate) -> None:
    @remote.guard
    def transfer_funds(amount: int, to: str) -> str:
        return f"sent {amount}"

    with remote.context(principal="frank", thread="t-1"):
        assert transfer_funds(amount=5, to="ACME") == "sent 5"


def test_guard_raises_denied_for_a_denied_call(remote: RemoteGate) -> None:
    @remote.guard
    def transfer_funds(amount: int, to: str) -> str:
        raise AssertionError("must not run")

    with remote.context(principal="frank"), pytest.raises(Denied) as info:
        transfer_funds(amount=5_000_000, to="ACME")
    assert info.value.verdict is not None and info.value.verdict.rule == "hard-limit"


def test_guard_waits_and_runs_the_edited_call_exactly_once(
    server: Server, remote: RemoteGate
) -> None:
    runs: list[int] = []

    @remote.guard
    def transfer_funds(amount: int, to: str) -> str:
        runs.append(amount)
        return f"sent {amount}"

    created = on_created(server)

    def agent() -> str:
        with remote.context(principal="frank", thread="t-edit", user_request="pay"):
            return str(transfer_funds(amount=50_000, to="ACME"))

    thread, out = in_thread(agent)
    req = wait_created(created)
    edited = {"name": "transfer_funds", "args": {"amount": 20_000, "to": "ACME"}}
    decide(server, "bob", req.id, {"type": "edit", "edited_action": edited})
    thread.join(20)
    assert out == ["sent 20000"] and runs == [20_000]
    call = server.client("alice").get(f"/v1/requests/{req.id}").json()["calls"][0]
    assert call["execution"] == "executed"


def test_guard_raises_rejected_with_the_reason(server: Server, remote: RemoteGate) -> None:
    @remote.guard
    def transfer_funds(amount: int, to: str) -> str:
        raise AssertionError("must not run")

    created = on_created(server)

    def agent() -> Any:
        with remote.context(principal="frank", thread="t-rej"):
            return transfer_funds(amount=50_000, to="ACME")

    thread, out = in_thread(agent)
    decide(server, "bob", wait_created(created).id, {"type": "reject", "message": "wrong IBAN"})
    thread.join(20)
    assert isinstance(out[0], Rejected) and "wrong IBAN" in str(out[0])


def test_async_guard_returns_the_rejection_text(server: Server, remote: RemoteGate) -> None:
    @remote.guard(on_reject="return")
    async def transfer_funds(amount: int, to: str) -> str:
        raise AssertionError("must not run")

    created = on_created(server)

    async def agent() -> Any:
        with remote.context(principal="frank", thread="t-async"):
            return await transfer_funds(amount=50_000, to="ACME")

    thread, out = in_thread(lambda: asyncio.run(agent()))
    decide(server, "carol", wait_created(created).id, {"type": "reject", "message": "later"})
    thread.join(20)
    assert out == ["User rejected the tool call for `transfer_funds` with reason: later"]


def test_submit_wait_decide_and_exactly_once(server: Server, remote: RemoteGate) -> None:
    with remote.context(principal="frank", thread="t-api"):
        sub = remote.submit([ToolCall("transfer_funds", {"amount": 50_000, "to": "X"}, id="c1")])
    assert sub.request is not None and sub.verdict_for("c1").needs_approval
    pending = remote.wait(sub.request.id, timeout=0.2)
    assert pending.status == "pending"
    approver = RemoteGate(server.url, server.tokens["bob"])
    try:
        approver.decide(sub.request.id, [{"tool_call_id": "c1", "type": "approve"}])
        with pytest.raises(AlreadyDecided) as info:
            approver.decide(sub.request.id, [{"tool_call_id": "c1", "type": "reject"}])
        assert info.value.by == "bob"
    finally:
        approver.close()
    req = remote.wait(sub.request.id)
    assert req.status == "resolved"

    async def run(args: dict[str, Any]) -> str:
        return "done"

    async def twice() -> None:
        assert await remote.arun_approved(req, "c1", run) == "done"
        with pytest.raises(AlreadyExecuted):
            await remote.arun_approved(req, "c1", run)

    asyncio.run(twice())


def test_ask_returns_the_humans_answer(server: Server, remote: RemoteGate) -> None:
    created = on_created(server)

    def agent() -> Any:
        with remote.context(principal="frank", thread="t-ask"):
            return remote.ask("Which region?", choices=["eu", "us"])

    thread, out = in_thread(agent)
    decide(server, "dave", wait_created(created).id, {"type": "respond", "message": "eu"})
    thread.join(20)
    assert out == ["eu"]


def test_ask_a_form_returns_answers_keyed_by_question_id(
    server: Server, remote: RemoteGate
) -> None:
    created = on_created(server)
    questions = [
        {"id": "region", "question": "Which region?", "choices": ["eu", "us"]},
        {"id": "tags", "question": "Tags?", "choices": ["a", "b"], "multiple": True},
    ]

    def agent() -> Any:
        with remote.context(principal="frank", thread="t-form"):
            return remote.ask(questions=questions, format="markdown")

    thread, out = in_thread(agent)
    answers = {"region": "us", "tags": ["b"]}
    decide(server, "dave", wait_created(created).id, {"type": "respond", "answers": answers})
    thread.join(20)
    assert out == [answers]


def test_a_bad_token_is_unauthorized(server: Server) -> None:
    with RemoteGate(server.url, "so_agent_wrong") as gate, pytest.raises(Unauthorized):
        gate.submit([ToolCall("get_price", {})])


def test_from_config_returns_a_remote_gate(
    tmp_path: Path, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "signoff.yaml"
    config.write_text("version: 1\nremote:\n  url: " + server.url + "\n  token: ${SIGNOFF_TOKEN}\n")
    monkeypatch.setenv("SIGNOFF_TOKEN", server.tokens["bot"])
    gate = Gate.from_config(config)
    assert isinstance(gate, RemoteGate)
    with gate, gate.context(principal="frank"):
        assert gate.submit([ToolCall("get_price", {})]).verdicts[0].allowed
    monkeypatch.delenv("SIGNOFF_TOKEN")
    with pytest.raises(PolicyError, match="SIGNOFF_TOKEN"):
        Gate.from_config(config)


@pytest.mark.slow
def test_waiting_survives_a_server_restart(tmp_path: Path) -> None:
    db = tmp_path / "signoff.db"
    first = start_server(SQLiteStore(db))
    port = int(first.url.rsplit(":", 1)[1])
    remote = RemoteGate(first.url, first.tokens["bot"], poll_timeout=1)
    try:
        with remote.context(principal="frank", thread="t-restart"):
            sub = remote.submit([ToolCall("transfer_funds", {"amount": 50_000, "to": "X"})])
        assert sub.request is not None
        thread, out = in_thread(lambda: remote.wait(sub.request.id))  # type: ignore[union-attr]
        first.close()  # the agent's long-poll loses its server
        policy = Policy.from_yaml(textwrap.dedent(POLICY))
        app = create_app(Gate(policy, SQLiteStore(db)), owns_gate=True)
        second = ServerThread(app, port=port)
        second.start()
        try:
            decide_again = Server(app, second, first.tokens)
            decide(decide_again, "bob", sub.request.id, {"type": "approve"})
            thread.join(30)
            assert out and isinstance(out[0], ApprovalRequest) and out[0].status == "resolved"
        finally:
            second.stop()
    finally:
        remote.close()


def test_a_step_too_big_for_the_server_is_its_413_not_an_unreachable_server(
    remote: RemoteGate,
) -> None:
    """A 10 MB argument: the server's answer names its body limit (before, the client saw a
    connection reset and reported the server unreachable, after retrying)."""
    call = ToolCall("delete_file", {"path": "x" * (10 * 1024 * 1024)})
    with pytest.raises(SignoffError) as caught:
        remote.submit([call], remote.make_context("erin"))
    assert not isinstance(caught.value, ServerUnavailable)
    assert "413" in str(caught.value) and "larger than 1048576 bytes" in str(caught.value)
