"""The ``mcp:`` section: resource reads and prompt gets gated like tool calls, through the
pseudo-tools ``mcp.resources/read`` and ``mcp.prompts/get``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from signoff import Gate, PolicyError
from signoff.integrations.mcp.gating import check_sections
from signoff.store import AuditQuery, MemoryStore
from tests.integrations.mcp.conftest import ERAS, POLICY, make_policy, next_pending, proxied

GATED = (
    POLICY
    + """
  mcp.resources/read:
    default: require_approval
    approvers: {roles: [admin]}
    allowed_decisions: [approve, edit, reject]
    editable_args: [uri]
  mcp.prompts/get: {default: require_approval, approvers: {roles: [admin]}}
mcp:
  resources:
    "notes://readme": deny
    "notes://s*": require_approval
  prompts:
    "gre?t": require_approval
"""
)


@pytest.fixture
async def gate() -> AsyncIterator[Gate]:
    g = Gate(make_policy(GATED), MemoryStore())
    yield g
    await g.aclose()


def _texts(result: types.ReadResourceResult) -> list[str]:
    return [c.text for c in result.contents if isinstance(c, types.TextResourceContents)]


@ERAS
async def test_a_denied_read_is_an_mcp_error_with_the_reason_and_audited(
    gate: Gate, upstream: Any, mode: str
) -> None:
    server, _ = upstream
    async with proxied(gate, server, mode=mode) as client:
        with pytest.raises(MCPError, match=r"denied by mcp.resources 'notes://readme'"):
            await client.read_resource("notes://readme")
        allowed = await client.read_resource("notes://other")  # no key matches: allow
    assert _texts(allowed) == ["note other"]
    await gate.store.flush_audit()
    rows = await gate.store.read_audit(AuditQuery(tool="mcp.resources/read"))
    assert [(r.event, r.rule) for r in rows] == [("denied", "mcp.resources")]


@ERAS
async def test_a_gated_read_waits_for_approval_and_runs_with_the_edit(
    gate: Gate, upstream: Any, mode: str
) -> None:
    server, _ = upstream
    async with proxied(gate, server, mode=mode) as client, anyio.create_task_group() as tg:
        results: list[Any] = []

        async def read() -> None:
            results.append(await client.read_resource("notes://shopping"))

        tg.start_soon(read)
        req = await next_pending(gate)
        edited = {"name": "mcp.resources/read", "args": {"uri": "notes://safe"}}
        await gate.adecide(req.id, [{"type": "edit", "edited_action": edited}], approver="alice")
    action = req.action_requests[0]
    assert (action.name, action.args) == ("mcp.resources/read", {"uri": "notes://shopping"})
    assert _texts(results[0]) == ["note safe"]
    assert (await gate.get(req.id)).calls[0].execution == "executed"


@ERAS
async def test_a_rejected_prompt_get_is_an_mcp_error_with_the_reason(
    gate: Gate, upstream: Any, mode: str
) -> None:
    server, _ = upstream
    async with proxied(gate, server, mode=mode) as client, anyio.create_task_group() as tg:
        errors: list[str] = []

        async def get() -> None:
            try:
                await client.get_prompt("greet", {"name": "x"})
            except MCPError as exc:
                errors.append(str(exc))

        tg.start_soon(get)
        req = await next_pending(gate)
        await gate.adecide(req.id, [{"type": "reject", "message": "not today"}], approver="alice")
    assert req.action_requests[0].args == {"name": "greet", "arguments": {"name": "x"}}
    assert len(errors) == 1 and "not today" in errors[0]


@pytest.mark.parametrize(
    ("section", "where"),
    [
        ({"resources": {"x://*": "maybe"}}, "mcp.resources"),
        ({"prompts": ["greet"]}, "mcp.prompts"),
        ({"tools": {}}, "mcp.tools"),
    ],
)
def test_a_malformed_mcp_section_names_the_field(section: dict[str, Any], where: str) -> None:
    with pytest.raises(PolicyError, match=where.replace(".", r"\.")):
        check_sections({"mcp": section}, filename="signoff.yaml")
