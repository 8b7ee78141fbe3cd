"""Decisions arriving through `signoff serve`'s HTTP API while the proxy holds a call.

The server and the proxy are separate gates on one SQLite file, as they are in practice (the
proxy runs inside the MCP client, the server somewhere else); the held call wakes through the
store's cross-process change watcher.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from signoff import Gate
from signoff.store import SQLiteStore
from tests.integrations.mcp.conftest import make_policy, next_pending, proxied, text_of

server = pytest.importorskip("signoff.server")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "signoff.db"


@pytest.fixture
def api(db_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    from signoff.server import ServerThread, create_app, create_token

    app = create_app(Gate(make_policy(), SQLiteStore(db_path)), owns_gate=True)
    thread = ServerThread(app)
    thread.start()
    db = app.state.signoff.db
    tokens = {who: asyncio.run(create_token(db, "approver", who))[0] for who in ("alice", "erin")}
    yield thread.url, tokens
    thread.stop()


@pytest.fixture
async def proxy_gate(db_path: Path) -> AsyncIterator[Gate]:
    gate = Gate(make_policy(), SQLiteStore(db_path))
    yield gate
    await gate.aclose()


async def _post_decision(
    url: str, token: str, request_id: str, decision: dict[str, Any]
) -> httpx.Response:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        return await http.post(
            f"/v1/requests/{request_id}/decisions",
            json={"decisions": [decision]},
            headers={"Authorization": f"Bearer {token}"},
        )


async def test_an_approval_posted_to_the_server_api_releases_the_held_call(
    api: tuple[str, dict[str, str]], proxy_gate: Gate, upstream: Any
) -> None:
    url, tokens = api
    server_, events = upstream
    responses: list[httpx.Response] = []

    async def approve_over_http() -> None:
        req = await next_pending(proxy_gate)
        # The agent's own user may not approve this rule (forbid_self_approval): refused.
        responses.append(await _post_decision(url, tokens["erin"], req.id, {"type": "approve"}))
        responses.append(await _post_decision(url, tokens["alice"], req.id, {"type": "approve"}))

    async with proxied(proxy_gate, server_) as client, anyio.create_task_group() as tg:
        tg.start_soon(approve_over_http)
        result = await client.call_tool("delete_file", {"path": "via-api.txt"})
    assert [r.status_code for r in responses] == [403, 200], [r.text for r in responses]
    assert not result.is_error and text_of(result) == "deleted via-api.txt"
    assert events == ["delete_file via-api.txt"]
    req = (await proxy_gate.alist())[0]
    assert (req.decisions[0].approver, req.decisions[0].channel) == ("alice", "api")


async def test_a_rejection_posted_to_the_server_api_returns_its_reason(
    api: tuple[str, dict[str, str]], proxy_gate: Gate, upstream: Any
) -> None:
    url, tokens = api
    server_, events = upstream

    async def reject_over_http() -> None:
        req = await next_pending(proxy_gate)
        decision = {"type": "reject", "message": "use the archive instead"}
        response = await _post_decision(url, tokens["alice"], req.id, decision)
        assert response.status_code == 200, response.text

    async with proxied(proxy_gate, server_) as client, anyio.create_task_group() as tg:
        tg.start_soon(reject_over_http)
        result = await client.call_tool("delete_file", {"path": "x"})
    assert result.is_error and "use the archive instead" in text_of(result)
    assert events == []


async def test_an_inquiry_answered_through_the_server_api(
    api: tuple[str, dict[str, str]], proxy_gate: Gate
) -> None:
    from mcp import Client

    from signoff.integrations.mcp import InquiryOptions, build_inquiry_server

    url, tokens = api
    inquiries = build_inquiry_server(proxy_gate, InquiryOptions(principal="erin"))

    async def answer_over_http() -> None:
        req = await next_pending(proxy_gate)
        decision = {"type": "respond", "message": "Thursday"}
        response = await _post_decision(url, tokens["alice"], req.id, decision)
        assert response.status_code == 200, response.text

    async with Client(inquiries) as client, anyio.create_task_group() as tg:
        tg.start_soon(answer_over_http)
        result = await client.call_tool("send_inquiry", {"question": "Which day?"})
    assert result.structured_content["status"] == "answered"
    assert result.structured_content["answer"] == "Thursday"
