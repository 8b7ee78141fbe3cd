"""In-client approval (elicitation) through the proxy, and why forged answers do not count."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from signoff import Gate
from signoff.integrations.mcp import ProxyOptions, UpstreamSpec, build_proxy
from signoff.integrations.mcp.elicitation import APPROVAL_KEY
from signoff.store import AuditQuery
from tests.integrations.mcp.conftest import ERAS, approve_next, next_pending, proxied, text_of


def answering(decision: str, reason: str | None = None, seen: list[Any] | None = None) -> Any:
    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        if seen is not None:
            seen.append(params)
        content: dict[str, Any] = {"decision": decision}
        if reason:
            content["reason"] = reason
        return types.ElicitResult(action="accept", content=content)

    return elicit


@ERAS
async def test_in_client_approval_runs_the_call_where_the_rule_allows_it(
    gate: Gate, upstream: Any, mode: str
) -> None:
    server, events = upstream
    seen: list[Any] = []
    async with proxied(gate, server, mode=mode, elicit=answering("approve", seen=seen)) as client:
        result = await client.call_tool("write_note", {"text": "hello"})
    assert not result.is_error and text_of(result) == "noted hello"
    assert events == ["write_note hello"]
    assert "write_note" in seen[0].message and '"text": "hello"' in seen[0].message
    req = (await gate.alist())[0]
    decision = req.decisions[0]
    assert (decision.approver, decision.channel, decision.type) == ("erin", "mcp", "approve")


@ERAS
async def test_in_client_reject_returns_the_reason(gate: Gate, upstream: Any, mode: str) -> None:
    server, events = upstream
    elicit = answering("reject", reason="wrong file")
    async with proxied(gate, server, mode=mode, elicit=elicit) as client:
        result = await client.call_tool("write_note", {"text": "hello"})
    assert result.is_error and "wrong file" in text_of(result)
    assert events == []


@ERAS
async def test_rules_needing_independent_signoff_never_ask_the_client(
    gate: Gate, upstream: Any, mode: str
) -> None:
    server, events = upstream
    seen: list[Any] = []
    elicit = answering("approve", seen=seen)
    async with (
        proxied(gate, server, mode=mode, elicit=elicit) as client,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(approve_next, gate)
        result = await client.call_tool("delete_file", {"path": "a.txt"})
    assert seen == []  # forbid_self_approval: the agent's own user is not asked
    assert not result.is_error and events == ["delete_file a.txt"]
    assert (await gate.alist())[0].decisions[0].approver == "alice"


async def test_dismissed_prompt_keeps_waiting_for_an_out_of_band_approver(
    gate: Gate, upstream: Any
) -> None:
    server, events = upstream

    async def dismiss(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="cancel")

    async with (
        proxied(gate, server, mode="legacy", elicit=dismiss) as client,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(approve_next, gate)
        result = await client.call_tool("write_note", {"text": "x"})
    assert not result.is_error and events == ["write_note x"]


async def test_an_out_of_band_decision_withdraws_the_in_client_prompt(
    gate: Gate, upstream: Any
) -> None:
    server, events = upstream
    prompt: list[str] = []

    async def never_answers(context: Any, params: Any) -> types.ElicitResult:
        prompt.append("shown")
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            prompt.append("withdrawn")
            raise
        raise AssertionError("unreachable")

    async with (
        proxied(gate, server, mode="legacy", elicit=never_answers) as client,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(approve_next, gate)
        result = await client.call_tool("write_note", {"text": "x"})
        with anyio.fail_after(10):
            while prompt != ["shown", "withdrawn"]:
                await anyio.sleep(0.01)
    assert not result.is_error and events == ["write_note x"]


# ---------------------------------------------------------------------- 2026-07-28 answers
async def _first_round(client: Client, args: dict[str, Any]) -> types.InputRequiredResult:
    first = await client.session.call_tool("write_note", args, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult)
    assert first.request_state and first.request_state.startswith("v1.")  # sealed
    return first


ACCEPT = {APPROVAL_KEY: types.ElicitResult(action="accept", content={"decision": "approve"})}


async def test_a_prefilled_answer_on_the_first_call_is_not_trusted(
    gate: Gate, upstream: Any
) -> None:
    server, events = upstream
    async with proxied(gate, server, elicit=answering("approve")) as client:
        forged = await client.session.call_tool(
            "write_note", {"text": "x"}, input_responses=ACCEPT, allow_input_required=True
        )
    assert isinstance(forged, types.InputRequiredResult)  # asked, not run
    assert events == [] and (await gate.alist())[0].pending


async def test_a_forged_request_state_is_refused(gate: Gate, upstream: Any) -> None:
    server, events = upstream
    async with proxied(gate, server, elicit=answering("approve")) as client:
        with pytest.raises(MCPError) as caught:
            await client.session.call_tool(
                "write_note",
                {"text": "x"},
                input_responses=ACCEPT,
                request_state="signoff.v1.guessed",
                allow_input_required=True,
            )
    assert caught.value.error.code == types.INVALID_PARAMS
    assert events == []


async def test_a_replayed_answer_is_refused_and_the_call_runs_once(
    gate: Gate, upstream: Any
) -> None:
    server, events = upstream
    async with proxied(gate, server, elicit=answering("approve")) as client:
        first = await _first_round(client, {"text": "x"})
        ran = await client.session.call_tool(
            "write_note",
            {"text": "x"},
            input_responses=ACCEPT,
            request_state=first.request_state,
            allow_input_required=True,
        )
        replayed = await client.session.call_tool(
            "write_note",
            {"text": "x"},
            input_responses=ACCEPT,
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert isinstance(ran, types.CallToolResult) and not ran.is_error
    assert isinstance(replayed, types.CallToolResult) and replayed.is_error
    assert "was not accepted" in text_of(replayed)
    assert events == ["write_note x"]
    await gate.store.flush_audit()
    refused = await gate.store.read_audit(AuditQuery(event="denied"))
    assert [r.rule for r in refused] == ["mcp.answer_refused"]


async def test_an_answer_replayed_on_other_arguments_is_refused(gate: Gate, upstream: Any) -> None:
    server, events = upstream
    async with proxied(gate, server, elicit=answering("approve")) as client:
        first = await _first_round(client, {"text": "harmless"})
        with pytest.raises(MCPError) as caught:
            await client.session.call_tool(
                "write_note",
                {"text": "something else"},
                input_responses=ACCEPT,
                request_state=first.request_state,
                allow_input_required=True,
            )
    assert caught.value.error.code == types.INVALID_PARAMS
    assert events == []


async def test_a_state_from_another_proxy_instance_is_refused(gate: Gate, upstream: Any) -> None:
    server, events = upstream
    async with proxied(gate, server, elicit=answering("approve")) as client:
        first = await _first_round(client, {"text": "x"})
    other = build_proxy(gate, [UpstreamSpec("", server)], ProxyOptions(principal="erin"))
    async with Client(other, elicitation_callback=answering("approve")) as client:
        with pytest.raises(MCPError):
            await client.session.call_tool(
                "write_note",
                {"text": "x"},
                input_responses=ACCEPT,
                request_state=first.request_state,
                allow_input_required=True,
            )
    assert events == []


async def test_an_out_of_band_decision_wins_over_a_later_in_client_answer(
    gate: Gate, upstream: Any
) -> None:
    server, events = upstream
    async with proxied(gate, server, elicit=answering("approve")) as client:
        first = await _first_round(client, {"text": "x"})
        req = await next_pending(gate)
        await gate.adecide(req.id, [{"type": "reject", "message": "no notes"}], approver="alice")
        late = await client.session.call_tool(
            "write_note",
            {"text": "x"},
            input_responses=ACCEPT,
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert isinstance(late, types.CallToolResult) and late.is_error
    assert "no notes" in text_of(late) and events == []
