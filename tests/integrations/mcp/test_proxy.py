"""The approval proxy with out-of-band approvers: real mcp client ↔ proxy ↔ upstream, both eras."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from signoff import Gate
from signoff.integrations.mcp import UpstreamSpec
from signoff.store import AuditQuery
from tests.integrations.mcp.conftest import (
    ERAS,
    abandon_when,
    approve_next,
    events_of,
    make_policy,
    next_pending,
    proxied,
    text_of,
    until,
)
from tests.integrations.mcp.upstream import make_upstream


@ERAS
async def test_tools_list_passes_through_names_descriptions_and_schemas(
    gate: Gate, upstream: Any, mode: str
) -> None:
    server, _ = upstream
    async with Client(server, mode=mode) as direct:
        expected = (await direct.list_tools()).tools
    async with proxied(gate, server, mode=mode) as client:
        listed = (await client.list_tools()).tools
    assert [t.name for t in listed] == [t.name for t in expected]
    for got, want in zip(listed, expected, strict=True):
        assert got.description == want.description
        assert got.input_schema == want.input_schema
        assert got.output_schema == want.output_schema


@ERAS
async def test_allowed_call_is_forwarded_and_audited(gate: Gate, upstream: Any, mode: str) -> None:
    server, events = upstream
    async with proxied(gate, server, mode=mode) as client:
        result = await client.call_tool("echo", {"text": "hi"})
    assert not result.is_error and text_of(result) == "hi"
    assert result.structured_content == {"result": "hi"}
    assert events == ["echo hi"]
    await gate.store.flush_audit()
    rows = await gate.store.read_audit(AuditQuery(tool="echo"))
    assert [(r.event, r.rule) for r in rows] == [("allowed", "echo.default")]


@ERAS
async def test_denied_call_is_an_error_result_naming_the_rule(
    gate: Gate, upstream: Any, mode: str
) -> None:
    server, events = upstream
    async with proxied(gate, server, mode=mode) as client:
        result = await client.call_tool("delete_file", {"path": "/"})
    assert result.is_error
    assert "protect-root" in text_of(result) and "never delete the root" in text_of(result)
    assert "Do not retry it unchanged" in text_of(result)
    assert events == []


@ERAS
async def test_schema_invalid_arguments_are_denied_with_field_errors(
    gate: Gate, upstream: Any, mode: str
) -> None:
    server, events = upstream
    async with proxied(gate, server, mode=mode) as client:
        result = await client.call_tool("transfer", {"amount": "lots", "to": "bob"})
    assert result.is_error
    assert "amount: 'lots' is not of type 'integer'" in text_of(result)
    assert "Fix the arguments" in text_of(result)
    assert events == [] and await gate.alist() == []


@ERAS
async def test_unknown_tool_is_an_error_result_listing_the_tools(
    gate: Gate, upstream: Any, mode: str
) -> None:
    server, _ = upstream
    async with proxied(gate, server, mode=mode) as client:
        result = await client.call_tool("format_disk", {})
    assert result.is_error
    assert "Unknown tool `format_disk`" in text_of(result) and "echo" in text_of(result)
    await gate.store.flush_audit()
    rows = await gate.store.read_audit(AuditQuery(tool="format_disk"))
    assert [(r.event, r.rule) for r in rows] == [("denied", "mcp.unknown_tool")]


async def test_tool_missing_from_the_policy_follows_unknown_tool_default(
    gate: Gate, upstream: Any
) -> None:
    server, events = upstream
    async with proxied(gate, server) as client, anyio.create_task_group() as tg:
        tg.start_soon(approve_next, gate)
        result = await client.call_tool("purge_cache", {})
    assert text_of(result) == "purged" and events == ["purge_cache"]
    req = (await gate.alist())[0]
    assert req.action_requests[0].rule == "defaults.unknown_tool"


@ERAS
async def test_approved_call_runs_once_and_relays_progress_after_heartbeats(
    gate: Gate, upstream: Any, mode: str
) -> None:
    server, events = upstream
    seen: list[tuple[float, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, message))

    async with proxied(gate, server, mode=mode) as client, anyio.create_task_group() as tg:
        tg.start_soon(approve_next, gate)
        result = await client.call_tool(
            "delete_file", {"path": "a.txt"}, progress_callback=progress
        )
    assert not result.is_error and text_of(result) == "deleted a.txt"
    assert events == ["delete_file a.txt"]
    req = (await gate.alist())[0]
    assert req.calls[0].execution == "executed"
    assert await events_of(gate.store, req.id) == [
        "created",
        "decided",
        "resolved",
        "executing",
        "executed",
    ]
    beats = [m for _, m in seen if m and req.id in m]
    assert beats and f"https://signoff.example/requests/{req.id}" in beats[0]
    assert seen[-1][1] == "deleting"
    values = [v for v, _ in seen]
    assert values == sorted(values) and len(set(values)) == len(values)


@ERAS
async def test_edit_forwards_the_edited_arguments_after_recheck(
    gate: Gate, upstream: Any, mode: str
) -> None:
    server, events = upstream

    async def edit() -> None:
        req = await next_pending(gate)
        call_id = req.calls[0].tool_call_id
        bad = {"name": "transfer", "args": {"amount": "ten", "to": "bob"}}
        with pytest.raises(Exception, match="schema"):
            await gate.adecide(req.id, [{"type": "edit", "edited_action": bad}], approver="alice")
        assert (await gate.get(req.id)).pending  # a refused edit changes nothing
        good = {"name": "transfer", "args": {"amount": 10, "to": "bob"}}
        await gate.adecide(
            req.id,
            [{"tool_call_id": call_id, "type": "edit", "edited_action": good}],
            approver="alice",
        )

    async with proxied(gate, server, mode=mode) as client, anyio.create_task_group() as tg:
        tg.start_soon(edit)
        result = await client.call_tool("transfer", {"amount": 5000, "to": "bob"})
    assert not result.is_error
    assert events == ["transfer 10 bob"]
    assert "a human reviewer edited this tool call" in text_of(result)
    assert text_of(result).endswith("sent 10 to bob")


@ERAS
async def test_reject_returns_the_reason_as_an_error_result(
    gate: Gate, upstream: Any, mode: str
) -> None:
    server, events = upstream

    async def reject() -> None:
        req = await next_pending(gate)
        await gate.adecide(
            req.id, [{"type": "reject", "message": "not on Fridays"}], approver="alice"
        )

    async with proxied(gate, server, mode=mode) as client, anyio.create_task_group() as tg:
        tg.start_soon(reject)
        result = await client.call_tool("delete_file", {"path": "a.txt"})
    assert result.is_error and "not on Fridays" in text_of(result)
    assert result.meta is not None and result.meta["signoff/outcome"]["resolution"] == "rejected"
    assert events == []


@ERAS
async def test_deadline_returns_no_decision_in_time_and_do_not_retry(
    gate: Gate, upstream: Any, mode: str
) -> None:
    server, events = upstream
    async with proxied(gate, server, mode=mode) as client:
        result = await client.call_tool("delete_file", {"path": "scratch"})
    assert result.is_error
    assert "No human decision arrived in time" in text_of(result)
    assert "Do not retry it automatically" in text_of(result)
    assert events == [] and (await gate.alist())[0].status == "expired"


@ERAS
async def test_client_cancellation_withdraws_the_pending_request(
    gate: Gate, upstream: Any, mode: str
) -> None:
    server, events = upstream
    async with proxied(gate, server, mode=mode) as client:
        await abandon_when(
            lambda: client.call_tool("delete_file", {"path": "a.txt"}), lambda: next_pending(gate)
        )

        async def cancelled() -> bool:
            reqs = await gate.alist()
            return bool(reqs) and reqs[0].status == "cancelled"

        await until(cancelled)
    req = (await gate.alist())[0]
    assert req.calls[0].resolved_by == "signoff-mcp"
    assert "cancelled the call or disconnected" in (req.calls[0].message or "")
    assert "cancelled" in await events_of(gate.store, req.id)
    assert events == []


@ERAS
async def test_client_cancellation_cancels_the_upstream_call(
    gate: Gate, upstream: Any, mode: str
) -> None:
    server, events = upstream
    async with proxied(gate, server, mode=mode) as client:

        async def seen(event: str) -> bool:
            return event in events

        await abandon_when(
            lambda: client.call_tool("slow", {"seconds": 30}),
            lambda: until(lambda: seen("slow started")),
        )
        await until(lambda: seen("slow cancelled"))


async def test_heartbeat_meta_carries_request_id_and_approval_url(
    gate: Gate, upstream: Any
) -> None:
    server, _ = upstream
    metas: list[dict[str, Any]] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ProgressNotification) and message.params.meta:
            metas.append(dict(message.params.meta))

    async def progress(value: float, total: float | None, message: str | None) -> None:
        pass

    async with (
        proxied(gate, server, mode="legacy", message_handler=on_message) as client,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(approve_next, gate)
        await client.call_tool("delete_file", {"path": "a.txt"}, progress_callback=progress)
    req = (await gate.alist())[0]
    assert metas and metas[0]["type"] == "APPROVAL"
    assert metas[0]["requestId"] == req.id
    assert metas[0]["approvalUrl"] == f"https://signoff.example/requests/{req.id}"


@ERAS
async def test_yolo_approves_at_once_but_deny_rules_still_apply(upstream: Any, mode: str) -> None:
    server, events = upstream
    async with Gate(make_policy(), auto_approve=True, store=_memory()) as gate:
        async with proxied(gate, server, mode=mode) as client:
            ran = await client.call_tool("delete_file", {"path": "a.txt"})
            denied = await client.call_tool("delete_file", {"path": "/"})
        req = (await gate.alist())[0]
    assert not ran.is_error and events == ["delete_file a.txt"]
    assert req.calls[0].resolved_by == "yolo" and req.calls[0].resolution == "approved"
    assert denied.is_error and "protect-root" in text_of(denied)


@ERAS
async def test_non_interactive_refuses_at_once_with_no_human_text(upstream: Any, mode: str) -> None:
    server, events = upstream
    gate = Gate(make_policy(), interactive=False, store=_memory())
    async with gate, proxied(gate, server, mode=mode) as client:
        result = await client.call_tool("delete_file", {"path": "a.txt"})
    assert result.is_error and "no human is available" in text_of(result)
    assert events == []


async def test_store_failure_refuses_the_gated_call(upstream: Any) -> None:
    from signoff.model import StoreError
    from signoff.store import MemoryStore

    class BrokenStore(MemoryStore):
        async def create_request(self, request: Any, events: Any) -> Any:
            raise StoreError("disk full")

    server, events = upstream
    async with Gate(make_policy(), BrokenStore()) as gate, proxied(gate, server) as client:
        held = await client.call_tool("delete_file", {"path": "a.txt"})
        allowed = await client.call_tool("echo", {"text": "still fine"})
    assert held.is_error and "could not record the approval request" in text_of(held)
    assert "disk full" in text_of(held)
    assert not allowed.is_error and events == ["echo still fine"]


async def test_when_every_channel_fails_the_call_is_refused_and_withdrawn(
    upstream: Any,
) -> None:
    class DeadChannel:
        name = "dead"

        async def notify(self, request: Any, gate: Any) -> None:
            raise ConnectionError("smtp unreachable")

        async def resolved(self, request: Any, gate: Any) -> None:
            pass

    server, events = upstream
    async with Gate(make_policy(), _memory(), channels=[DeadChannel()]) as gate:
        async with proxied(gate, server) as client:
            result = await client.call_tool("delete_file", {"path": "a.txt"})
        req = (await gate.alist())[0]
    assert result.is_error and "no approver could be notified" in text_of(result)
    assert "smtp unreachable" in text_of(result)
    assert req.status == "cancelled" and events == []


@ERAS
async def test_several_upstreams_get_prefixed_names_and_policy_globs(gate: Gate, mode: str) -> None:
    a, a_events = make_upstream("a")
    b, b_events = make_upstream("b")
    specs = [UpstreamSpec("a", a), UpstreamSpec("b", b)]
    async with proxied(gate, None, mode=mode, specs=specs) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        echoed = await client.call_tool("b__echo", {"text": "via b"})
        async with anyio.create_task_group() as tg:
            tg.start_soon(approve_next, gate)
            deleted = await client.call_tool("a__delete_file", {"path": "x"})
    assert "a__echo" in names and "b__delete_file" in names and "echo" not in names
    assert text_of(echoed) == "via b" and b_events == ["echo via b"]
    assert text_of(deleted) == "deleted x" and a_events == ["delete_file x"]
    req = (await gate.alist())[0]
    assert req.action_requests[0].name == "a__delete_file"
    assert req.attrs == {"mcp_upstream": "a"}


def _memory() -> Any:
    from signoff.store import MemoryStore

    return MemoryStore()
