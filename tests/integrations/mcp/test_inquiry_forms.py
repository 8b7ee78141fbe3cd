"""The inquiry server's forms (several questions, one round), choices that bind, and who may
call ``answer_inquiry`` (``--answer-tool``), over real MCP clients — in memory and over
streamable HTTP on loopback with real sessions."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import uvicorn
from mcp import Client, StdioServerParameters

from signoff import Gate
from signoff.integrations.mcp import InquiryOptions, build_inquiry_server
from signoff.integrations.mcp.inquiry_answering import answer_refusal, offers_answer_tool
from tests.integrations.mcp.conftest import ERAS, next_pending, text_of

ROOT = Path(__file__).resolve().parents[3]

FORM: list[dict[str, Any]] = [
    {"id": "region", "question": "Which region?", "choices": ["eu", "us"]},
    {
        "id": "features",
        "question": "Which features?",
        "choices": ["logs", "metrics"],
        "multiple": True,
        "default_answer": ["logs"],
    },
]


def _server(gate: Gate, **options: Any) -> Any:
    return build_inquiry_server(gate, InquiryOptions(principal="erin", heartbeat_s=0.05, **options))


async def _tool_names(client: Client) -> list[str]:
    return [t.name for t in (await client.list_tools()).tools]


# ---------------------------------------------------------------------- the rule
@pytest.mark.parametrize(
    ("mode", "many", "asking", "answering", "allowed"),
    [
        ("other-sessions", True, "a", "b", True),
        ("other-sessions", True, "a", "a", False),
        ("other-sessions", True, None, "b", True),  # asked elsewhere (another process)
        ("other-sessions", True, "a", None, False),  # sessionless: cannot tell it apart
        ("other-sessions", False, "a", "b", False),  # stdio: one session
        ("off", True, "a", "b", False),
        ("all", False, "a", "a", True),
    ],
)
def test_who_may_answer(
    mode: Any, many: bool, asking: str | None, answering: str | None, allowed: bool
) -> None:
    refusal = answer_refusal(mode, many_sessions=many, asking=asking, answering=answering)
    assert (refusal is None) is allowed


def test_where_the_tool_is_offered() -> None:
    assert not offers_answer_tool("other-sessions", many_sessions=False, session="a")
    assert not offers_answer_tool("other-sessions", many_sessions=True, session=None)
    assert offers_answer_tool("other-sessions", many_sessions=True, session="a")
    assert not offers_answer_tool("off", many_sessions=True, session="a")
    assert offers_answer_tool("all", many_sessions=False, session=None)


# ---------------------------------------------------------------------- one session (stdio)
async def test_one_session_is_never_offered_answer_inquiry_and_cannot_call_it(
    gate: Gate,
) -> None:
    async with Client(_server(gate)) as client:
        assert "answer_inquiry" not in await _tool_names(client)
        asked = await client.call_tool("start_inquiry", {"question": "Ship?"})
        iid = asked.structured_content["inquiry_id"]
        own = await client.call_tool("answer_inquiry", {"inquiry_id": iid, "answer": "yes"})
    assert own.is_error and "one session" in text_of(own)
    assert (await gate.get(iid)).pending


async def test_answer_tool_all_lets_even_the_asker_answer(gate: Gate) -> None:
    async with Client(_server(gate, answer_tool="all")) as client:
        assert "answer_inquiry" in await _tool_names(client)
        asked = await client.call_tool("start_inquiry", {"question": "Ship?"})
        iid = asked.structured_content["inquiry_id"]
        own = await client.call_tool("answer_inquiry", {"inquiry_id": iid, "answer": "yes"})
    assert own.structured_content["accepted"] is True


async def test_the_asking_session_may_not_answer_but_another_may(gate: Gate) -> None:
    server = _server(gate, many_sessions=True)
    async with Client(server, mode="legacy") as asker, Client(server, mode="legacy") as phone:
        assert "answer_inquiry" in await _tool_names(asker)
        asked = await asker.call_tool("start_inquiry", {"question": "Ship?"})
        iid = asked.structured_content["inquiry_id"]
        own = await asker.call_tool("answer_inquiry", {"inquiry_id": iid, "answer": "yes"})
        assert own.is_error and "session that asked" in text_of(own)
        assert (await gate.get(iid)).pending
        other = await phone.call_tool("answer_inquiry", {"inquiry_id": iid, "answer": "no"})
    assert other.structured_content["accepted"] is True
    assert (await gate.get(iid)).calls[0].message == "no"


async def test_a_sessionless_2026_request_is_not_offered_the_tool_nor_may_answer(
    gate: Gate,
) -> None:
    server = _server(gate, many_sessions=True)
    async with Client(server, mode="legacy") as asker, Client(server, mode="auto") as modern:
        asked = await asker.call_tool("start_inquiry", {"question": "Ship?"})
        iid = asked.structured_content["inquiry_id"]
        assert "answer_inquiry" not in await _tool_names(modern)
        refused = await modern.call_tool("answer_inquiry", {"inquiry_id": iid, "answer": "no"})
    assert refused.is_error and "no MCP session" in text_of(refused)
    assert (await gate.get(iid)).pending


async def test_answer_tool_off_is_never_offered(gate: Gate) -> None:
    server = _server(gate, many_sessions=True, answer_tool="off")
    async with Client(server, mode="legacy") as asker, Client(server, mode="legacy") as phone:
        asked = await asker.call_tool("start_inquiry", {"question": "Ship?"})
        iid = asked.structured_content["inquiry_id"]
        assert "answer_inquiry" not in await _tool_names(phone)
        refused = await phone.call_tool("answer_inquiry", {"inquiry_id": iid, "answer": "no"})
    assert refused.is_error and "--answer-tool off" in text_of(refused)


# ---------------------------------------------------------------------- forms and choices
@ERAS
async def test_a_form_is_answered_with_an_object_keyed_by_question_id(
    gate: Gate, mode: str
) -> None:
    async def answer() -> None:
        req = await next_pending(gate)
        assert req.inquiry is not None and req.inquiry.is_form
        answers = {"region": "us", "features": ["metrics", "logs"]}
        await gate.adecide(req.id, [{"type": "respond", "answers": answers}], approver="alice")

    async with Client(_server(gate), mode=mode) as client, anyio.create_task_group() as tg:
        tg.start_soon(answer)
        result = await client.call_tool("send_inquiry", {"questions": FORM, "format": "markdown"})
    assert not result.is_error
    assert result.structured_content["status"] == "answered"
    assert result.structured_content["answer"] == {"region": "us", "features": ["metrics", "logs"]}
    assert '"region": "us"' in text_of(result)


async def test_an_answer_outside_the_choices_is_an_error_result_and_stays_pending(
    gate: Gate,
) -> None:
    server = _server(gate, many_sessions=True)
    async with Client(server, mode="legacy") as asker, Client(server, mode="legacy") as phone:
        asked = await asker.call_tool("start_inquiry", {"questions": FORM})
        iid = asked.structured_content["inquiry_id"]
        bad = await phone.call_tool(
            "answer_inquiry",
            {"inquiry_id": iid, "answers": {"region": "<b>mars</b>", "features": []}},
        )
        assert bad.is_error and "decisions[0].answers.region" in text_of(bad)
        assert (await gate.get(iid)).pending
        single = await phone.call_tool("answer_inquiry", {"inquiry_id": iid, "answer": "eu"})
        assert single.is_error and "decisions[0].answers" in text_of(single)
        good = await phone.call_tool(
            "answer_inquiry", {"inquiry_id": iid, "answers": {"region": "eu"}}
        )
        assert good.structured_content["accepted"] is True
        got = await asker.call_tool("get_answer", {"inquiry_id": iid})
    assert got.structured_content["answer"] == {"region": "eu", "features": []}


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (
            {"questions": [{"id": "a", "question": "Q"}, {"id": "a", "question": "R"}]},
            "questions[1].id",
        ),
        ({"questions": [{"id": "a", "question": "Q", "multiple": True}]}, "questions[0].multiple"),
        ({"question": "Q", "choices": ["x"], "default_answer": "y"}, "default_answer"),
        ({}, "question"),
    ],
)
async def test_a_bad_inquiry_is_an_error_result_naming_the_field(
    gate: Gate, args: dict[str, Any], field: str
) -> None:
    async with Client(_server(gate)) as client:
        result = await client.call_tool("send_inquiry", args)
    assert result.is_error and field in text_of(result)
    assert await gate.alist() == []


@ERAS
async def test_a_form_is_asked_in_the_client_with_one_field_per_question(
    gate: Gate, mode: str
) -> None:
    seen: list[dict[str, Any]] = []

    async def elicit(_ctx: Any, params: Any) -> types.ElicitResult:
        seen.append(params.requested_schema)
        return types.ElicitResult(
            action="accept", content={"region": "eu", "features": ["metrics"]}
        )

    async with Client(_server(gate), mode=mode, elicitation_callback=elicit) as client:
        result = await client.call_tool("send_inquiry", {"questions": FORM})
    assert result.structured_content["answer"] == {"region": "eu", "features": ["metrics"]}
    props = seen[0]["properties"]
    assert props["region"]["enum"] == ["eu", "us"]
    assert props["features"]["items"]["enum"] == ["logs", "metrics"]
    assert props["features"]["default"] == ["logs"] and seen[0]["required"] == ["region"]


# ---------------------------------------------------------------------- real HTTP sessions
@asynccontextmanager
async def _http(gate: Gate) -> AsyncIterator[str]:
    """The inquiry server on loopback, as `signoff inquiry-server --transport http` runs it."""
    server = _server(gate, many_sessions=True)
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # clients queue in the backlog until uvicorn accepts: no start-up race
    port = sock.getsockname()[1]
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: web.serve(sockets=[sock]))
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            web.should_exit = True
    sock.close()


async def test_over_http_the_phone_session_answers_and_the_asking_session_may_not(
    gate: Gate,
) -> None:
    async with _http(gate) as url:
        async with Client(url, mode="legacy") as asker, Client(url, mode="legacy") as phone:
            assert "answer_inquiry" in await _tool_names(phone)
            asked = await asker.call_tool("start_inquiry", {"question": "Ship?"})
            iid = asked.structured_content["inquiry_id"]
            own = await asker.call_tool("answer_inquiry", {"inquiry_id": iid, "answer": "yes"})
            assert own.is_error and "session that asked" in text_of(own)
            other = await phone.call_tool("answer_inquiry", {"inquiry_id": iid, "answer": "no"})
            assert other.structured_content["accepted"] is True
        async with Client(url, mode="auto") as sessionless:  # 2026-07-28: no session id
            assert "answer_inquiry" not in await _tool_names(sessionless)
    assert (await gate.get(iid)).calls[0].message == "no"


# ---------------------------------------------------------------------- the command
def _command(tmp_path: Path, *flags: str) -> StdioServerParameters:
    config = tmp_path / "signoff.yaml"
    config.write_text("version: 1\nstore: sqlite:///signoff.db\n", encoding="utf-8")
    args = ["-m", "signoff", "inquiry-server", "-c", str(config), "--principal", "erin"]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'src'}"}
    return StdioServerParameters(
        command=sys.executable, args=[*args, *flags], env=env, cwd=str(tmp_path)
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_signoff_inquiry_server_on_stdio_never_offers_answer_inquiry(
    tmp_path: Path, mode: str
) -> None:
    async with Client(_command(tmp_path), mode=mode) as client:
        assert "answer_inquiry" not in await _tool_names(client)
    async with Client(_command(tmp_path, "--answer-tool", "all"), mode=mode) as client:
        assert "answer_inquiry" in await _tool_names(client)


def test_a_bad_answer_tool_mode_is_refused(tmp_path: Path) -> None:
    params = _command(tmp_path, "--answer-tool", "everyone")
    done = subprocess.run(
        [params.command, *params.args],
        env=params.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "--answer-tool is one of off" in done.stderr


async def test_a_suggestion_outside_binding_choices_is_dropped(gate: Gate) -> None:
    async def suggest(question: str, choices: Any) -> str:
        return "mars"

    async with Client(_server(gate, suggester=suggest)) as client:
        asked = await client.call_tool(
            "start_inquiry", {"question": "Region?", "choices": ["eu", "us"]}
        )
    req = await gate.get(asked.structured_content["inquiry_id"])
    assert req.inquiry is not None and req.inquiry.default_answer is None


async def test_the_in_client_form_shows_agent_text_inertly(gate: Gate) -> None:
    seen: list[Any] = []

    async def elicit(_ctx: Any, params: Any) -> types.ElicitResult:
        seen.append(params)
        return types.ElicitResult(action="accept", content={"a": "x"})

    hostile = {
        "question": "Plan\x1b[2J \u202etxt",
        "questions": [{"id": "a", "question": "Q\u200b?"}],
    }
    async with Client(_server(gate), mode="legacy", elicitation_callback=elicit) as client:
        result = await client.call_tool("send_inquiry", hostile)
    assert result.structured_content["answer"] == {"a": "x"}
    assert seen[0].message == "Plan␛[2J <U+202E>txt"
    assert seen[0].requested_schema["properties"]["a"]["title"] == "Q<U+200B>?"
