"""The inquiry server: a human as an MCP tool, over a real mcp client, both eras."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from signoff import Gate
from signoff.integrations.mcp import InquiryOptions, build_inquiry_server
from signoff.store import MemoryStore
from tests.integrations.mcp.conftest import ERAS, abandon_when, make_policy, next_pending, text_of


@asynccontextmanager
async def inquiry_client(
    gate: Gate, *, mode: str = "auto", elicit: Any = None, handler: Any = None, **options: Any
) -> AsyncIterator[Client]:
    opts = InquiryOptions(principal="erin", heartbeat_s=0.05, **options)
    server = build_inquiry_server(gate, opts)
    async with Client(
        server, mode=mode, elicitation_callback=elicit, message_handler=handler
    ) as client:
        yield client


async def respond_next(gate: Gate, answer: str, approver: str = "alice") -> None:
    req = await next_pending(gate)
    await gate.adecide(req.id, [{"type": "respond", "message": answer}], approver=approver)


@ERAS
async def test_answered_through_the_api_while_waiting(gate: Gate, mode: str) -> None:
    async with inquiry_client(gate, mode=mode) as client, anyio.create_task_group() as tg:
        tg.start_soon(respond_next, gate, "the blue one")
        result = await client.call_tool(
            "send_inquiry",
            {"question": "Which colour?", "choices": ["red", "blue"], "allow_other": True},
        )
    data = result.structured_content
    assert not result.is_error and data["status"] == "answered"
    assert data["answer"] == "the blue one" and data["waited_s"] >= 0
    req = await gate.get(data["inquiry_id"])
    assert req.kind == "inquiry" and req.inquiry is not None
    assert req.inquiry.choices == ["red", "blue"]
    assert "the blue one" in text_of(result)


async def test_the_question_is_announced_at_once_in_progress_meta(gate: Gate) -> None:
    metas: list[dict[str, Any]] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ProgressNotification) and message.params.meta:
            metas.append(dict(message.params.meta))

    async def progress(value: float, total: float | None, message: str | None) -> None:
        pass

    async def answer_after_announcement() -> None:
        with anyio.fail_after(10):
            while not metas:
                await anyio.sleep(0.01)
        await respond_next(gate, "yes")

    async with (
        inquiry_client(gate, mode="legacy", handler=on_message) as client,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(answer_after_announcement)
        result = await client.call_tool(
            "send_inquiry", {"question": "Ship it?"}, progress_callback=progress
        )
    inquiry_id = result.structured_content["inquiry_id"]
    assert metas[0]["inquiryId"] == inquiry_id
    assert metas[0]["question"] == "Ship it?" and metas[0]["type"] == "INQUIRY"


async def test_progress_text_carries_the_id_and_question_without_meta(gate: Gate) -> None:
    seen: list[str] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    async with inquiry_client(gate) as client, anyio.create_task_group() as tg:
        tg.start_soon(respond_next, gate, "yes")
        result = await client.call_tool(
            "send_inquiry", {"question": "Ship it?"}, progress_callback=progress
        )
    assert result.structured_content["inquiry_id"] in seen[0] and "Ship it?" in seen[0]


async def test_answer_inquiry_from_a_second_client_wins_once(gate: Gate) -> None:
    async with (
        inquiry_client(gate) as asker,
        inquiry_client(gate, mode="legacy", many_sessions=True) as other_device,
    ):

        async def answer_from_other_device() -> None:
            req = await next_pending(gate)
            first = await other_device.call_tool(
                "answer_inquiry", {"inquiry_id": req.id, "answer": "Tuesday"}
            )
            assert first.structured_content["accepted"] is True
            second = await other_device.call_tool(
                "answer_inquiry", {"inquiry_id": req.id, "answer": "Friday"}
            )
            assert second.structured_content == {
                "accepted": False,
                "inquiry_id": req.id,
                "status": "answered",
            }

        async with anyio.create_task_group() as tg:
            tg.start_soon(answer_from_other_device)
            result = await asker.call_tool("send_inquiry", {"question": "Which day?"})
    assert result.structured_content["answer"] == "Tuesday"
    req = await gate.get(result.structured_content["inquiry_id"])
    assert [(d.approver, d.channel) for d in req.decisions] == [("erin", "mcp")]


@ERAS
async def test_declined_is_a_normal_result_with_guidance(gate: Gate, mode: str) -> None:
    async def decline() -> None:
        req = await next_pending(gate)
        await gate.adecide(req.id, [{"type": "reject", "message": "ask Bob"}], approver="alice")

    async with inquiry_client(gate, mode=mode) as client, anyio.create_task_group() as tg:
        tg.start_soon(decline)
        result = await client.call_tool("send_inquiry", {"question": "Budget?"})
    assert not result.is_error
    assert result.structured_content["status"] == "declined"
    assert result.structured_content["answer"] is None
    assert "ask Bob" in text_of(result)
    assert "do not ask the same question again" in text_of(result)


async def test_expired_is_a_normal_result_with_guidance(gate: Gate) -> None:
    async with inquiry_client(gate) as client:
        result = await client.call_tool("send_inquiry", {"question": "Budget?", "timeout_s": 1})
    assert not result.is_error
    assert result.structured_content["status"] == "expired"
    assert result.structured_content["waited_s"] >= 1
    assert "do not ask the same question again" in text_of(result)


@ERAS
async def test_answered_in_the_client_with_the_suggested_default(gate: Gate, mode: str) -> None:
    seen: list[Any] = []

    async def take_default(context: Any, params: Any) -> types.ElicitResult:
        seen.append(params)
        default = params.requested_schema["properties"]["answer"]["default"]
        return types.ElicitResult(action="accept", content={"answer": default})

    async with inquiry_client(gate, mode=mode, elicit=take_default) as client:
        result = await client.call_tool(
            "send_inquiry",
            {"question": "Deploy where?", "choices": ["eu", "us"], "default_answer": "eu"},
        )
    assert result.structured_content["status"] == "answered"
    assert result.structured_content["answer"] == "eu"
    assert seen[0].message == "Deploy where?"
    assert seen[0].requested_schema["properties"]["answer"]["enum"] == ["eu", "us"]


@ERAS
async def test_dismissed_in_the_client_is_cancelled(gate: Gate, mode: str) -> None:
    async def dismiss(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="cancel")

    async with inquiry_client(gate, mode=mode, elicit=dismiss) as client:
        result = await client.call_tool("send_inquiry", {"question": "Deploy where?"})
    assert result.structured_content["status"] == "cancelled"
    assert "do not ask the same question again" in text_of(result)


async def test_start_inquiry_returns_at_once_and_get_answer_collects(gate: Gate) -> None:
    async with inquiry_client(gate) as client:
        started = await client.call_tool("start_inquiry", {"question": "Name the release?"})
        inquiry_id = started.structured_content["inquiry_id"]
        assert started.structured_content["status"] == "pending"
        assert "get_answer" in text_of(started)
        early = await client.call_tool("get_answer", {"inquiry_id": inquiry_id, "wait_s": 0})
        assert early.structured_content["status"] == "pending"
        async with anyio.create_task_group() as tg:
            tg.start_soon(respond_next, gate, "Aurora")
            later = await client.call_tool("get_answer", {"inquiry_id": inquiry_id, "wait_s": 30})
    assert later.structured_content["status"] == "answered"
    assert later.structured_content["answer"] == "Aurora"


@pytest.mark.parametrize("mode_flag", ["yolo", "non_interactive"])
async def test_unattended_modes_answer_unavailable_at_once(mode_flag: str) -> None:
    kwargs = {"auto_approve": True} if mode_flag == "yolo" else {"interactive": False}
    async with Gate(make_policy(), MemoryStore(), **kwargs) as gate:
        async with inquiry_client(gate) as client:
            result = await client.call_tool("send_inquiry", {"question": "Proceed?"})
        req = (await gate.alist())[0]
    assert result.structured_content["status"] == "unavailable"
    assert "Decide yourself" in text_of(result)
    assert req.status == "resolved"  # recorded and audited, not silently skipped


async def test_a_suggester_fills_the_default_answer(gate: Gate) -> None:
    async def suggest(question: str, choices: Sequence[str] | None) -> str | None:
        return "staging"

    async with inquiry_client(gate, suggester=suggest) as client:
        started = await client.call_tool("start_inquiry", {"question": "Where?"})
    req = await gate.get(started.structured_content["inquiry_id"])
    assert req.inquiry is not None and req.inquiry.default_answer == "staging"


async def test_client_cancellation_withdraws_the_inquiry(gate: Gate) -> None:
    async with inquiry_client(gate) as client:
        await abandon_when(
            lambda: client.call_tool("send_inquiry", {"question": "Hm?"}),
            lambda: next_pending(gate),
        )
        req = (await gate.alist())[0]
        with anyio.fail_after(10):
            while (await gate.get(req.id)).status != "cancelled":
                await anyio.sleep(0.01)


async def test_bad_arguments_and_unknown_ids_are_error_results(gate: Gate) -> None:
    async with inquiry_client(gate) as client:
        empty = await client.call_tool("send_inquiry", {"question": ""})
        unknown = await client.call_tool("get_answer", {"inquiry_id": "req_nope"})
        answer = await client.call_tool("answer_inquiry", {"inquiry_id": "req_nope", "answer": "x"})
    assert empty.is_error and "question" in text_of(empty)
    assert unknown.is_error and "req_nope" in text_of(unknown)
    assert answer.is_error


async def test_a_replayed_in_client_answer_is_not_accepted(gate: Gate) -> None:
    from signoff.integrations.mcp.elicitation import ANSWER_KEY

    async with inquiry_client(gate, elicit=lambda c, p: None) as client:
        args = {"question": "Which day?"}
        first = await client.session.call_tool("send_inquiry", args, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        reply = {ANSWER_KEY: types.ElicitResult(action="accept", content={"answer": "Mon"})}
        answered = await client.session.call_tool(
            "send_inquiry",
            args,
            input_responses=reply,
            request_state=first.request_state,
            allow_input_required=True,
        )
        replayed = await client.session.call_tool(
            "send_inquiry",
            args,
            input_responses=reply,
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert isinstance(answered, types.CallToolResult)
    assert answered.structured_content["answer"] == "Mon"
    assert isinstance(replayed, types.CallToolResult) and replayed.is_error
