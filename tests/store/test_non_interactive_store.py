"""A non-interactive step on every store (memory, SQLite, PostgreSQL): each call's own answer
is kept in the row and the audit chain, and the allow-listed call runs exactly once."""

from __future__ import annotations

from signoff import Gate, Policy, ToolCall
from signoff.store import AuditQuery, Store

POLICY = """
version: 1
defaults: {unknown_tool: require_approval}
people:
  alice: {roles: [admin]}
tools:
  execute: {default: require_approval}
gate:
  non_interactive:
    shell_tools: [execute]
    allow_list: [ls, "git status"]
"""


async def test_each_call_keeps_its_own_answer_and_the_approved_one_runs_once(
    store: Store,
) -> None:
    gate = Gate(Policy.from_yaml(POLICY), store, interactive=False)
    await gate.astart()
    calls = [
        ToolCall("execute", {"command": "git status && ls"}, id="ok"),
        ToolCall("execute", {"command": "ls; rm -rf ~"}, id="bad"),
        ToolCall("send_email", {"to": "x@example.com"}, id="mail"),
    ]
    sub = await gate.asubmit(calls, gate.make_context("alice"))
    assert sub.request is not None
    stored = await gate.get(sub.request.id)
    answers = {c.tool_call_id: (c.resolution, c.resolved_by) for c in stored.calls}
    assert answers == {
        "ok": ("approved", "non-interactive"),
        "bad": ("rejected", "non-interactive"),
        "mail": ("rejected", "non-interactive"),
    }
    ran: list[object] = []

    async def run(args: dict[str, object]) -> str:
        ran.append(args)
        return "done"

    await gate.arun_approved(stored, "ok", run)
    assert ran == [{"command": "git status && ls"}]
    await gate.store.flush_audit()
    rows = await gate.store.read_audit(AuditQuery(request_id=stored.id))
    decided = {r.tool_call_id: r.data["type"] for r in rows if r.event == "decided"}
    assert decided == {"ok": "approve", "bad": "reject", "mail": "reject"}
    assert [r.event for r in rows][-2:] == ["executing", "executed"]
    await gate.aclose()
