"""The inquiry server with ``inquiries:`` judges (issue #16 part 2): the model learns that a
judge, not a human, answered; ``inquiries.suggest`` and ``--suggester`` fill the default
answer through one code path. A real mcp client, a python judge."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest
from mcp import Client

from signoff import Gate, Policy
from signoff.integrations.mcp import InquiryOptions, build_inquiry_server
from signoff.integrations.mcp.inquiry_tools import RESULT_SCHEMA
from signoff.store import MemoryStore
from tests.gate import inquiry_judges
from tests.gate.test_inquiry_fallback import policy_text
from tests.integrations.mcp.conftest import text_of


@pytest.fixture(autouse=True)
def _reset() -> None:
    inquiry_judges.reset()


async def gate_with(section: str) -> Gate:
    gate = Gate(Policy.from_yaml(policy_text(section)), MemoryStore())
    await gate.astart()
    return gate


@pytest.fixture
async def fallback_gate() -> AsyncIterator[Gate]:
    gate = await gate_with("inquiries:\n  fallback: {judge: rules, after: 0.2s}\n")
    yield gate
    await gate.aclose()


async def test_the_model_is_told_a_judge_answered_not_a_human(fallback_gate: Gate) -> None:
    inquiry_judges.answers["Which region?"] = "us"
    opts = InquiryOptions(principal="erin", heartbeat_s=0.05, in_client=False)
    async with Client(build_inquiry_server(fallback_gate, opts)) as client:
        result = await client.call_tool(
            "send_inquiry", {"question": "Which region?", "choices": ["eu", "us"]}
        )
    assert result.structured_content is not None
    assert result.structured_content["status"] == "answered"
    assert result.structured_content["answer"] == "us"
    assert result.structured_content["answered_by"] == "judge:rules"
    text = text_of(result)
    assert "judge:rules" in text and "not a human" in text and "The human answered" not in text


def test_answered_by_is_declared_in_the_result_schema() -> None:
    assert "answered_by" in RESULT_SCHEMA["properties"]
    assert "answered_by" not in RESULT_SCHEMA["required"]


async def test_a_human_answer_has_no_answered_by() -> None:
    gate = await gate_with("inquiries:\n  fallback: {judge: rules, after: 2m}\n")
    try:
        opts = InquiryOptions(principal="erin", heartbeat_s=0.05, in_client=False)
        async with Client(build_inquiry_server(gate, opts)) as client:
            started = await client.call_tool("start_inquiry", {"question": "Q?"})
            assert started.structured_content is not None
            inquiry_id = started.structured_content["inquiry_id"]
            assert (await gate.get(inquiry_id)).fallback is not None
            await gate.adecide(
                inquiry_id, [{"type": "respond", "message": "fine"}], approver="alice"
            )
            result = await client.call_tool("get_answer", {"inquiry_id": inquiry_id})
        assert result.structured_content is not None
        assert result.structured_content["answer"] == "fine"
        assert "answered_by" not in result.structured_content
        assert text_of(result).startswith("The human answered")
        assert not inquiry_judges.asked
    finally:
        await gate.aclose()


async def test_inquiries_suggest_fills_the_default_without_the_flag() -> None:
    inquiry_judges.answers["Where?"] = "staging"
    gate = await gate_with("inquiries:\n  suggest: {judge: rules}\n")
    try:
        opts = InquiryOptions(principal="erin", heartbeat_s=0.05)
        async with Client(build_inquiry_server(gate, opts)) as client:
            started = await client.call_tool("start_inquiry", {"question": "Where?"})
        assert started.structured_content is not None
        req = await gate.get(started.structured_content["inquiry_id"])
        assert req.inquiry is not None and req.inquiry.default_answer == "staging"
    finally:
        await gate.aclose()


async def test_the_suggester_flag_is_an_alias_with_the_same_checks() -> None:
    async def suggest(question: str, choices: Sequence[str] | None) -> str | None:
        raise RuntimeError("model down")

    gate = await gate_with("")
    try:
        opts = InquiryOptions(principal="erin", heartbeat_s=0.05, suggester=suggest)
        async with Client(build_inquiry_server(gate, opts)) as client:
            started = await client.call_tool("start_inquiry", {"question": "Where?"})
        assert started.structured_content is not None
        req = await gate.get(started.structured_content["inquiry_id"])
        assert req.pending and req.inquiry is not None and req.inquiry.default_answer is None
    finally:
        await gate.aclose()
