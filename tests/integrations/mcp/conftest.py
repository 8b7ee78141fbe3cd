from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from signoff import ApprovalRequest, Gate, Policy
from signoff.integrations.mcp import ProxyOptions, UpstreamSpec, build_proxy
from signoff.store import MemoryStore, Store
from tests.integrations.mcp.upstream import make_upstream

POLICY = """
version: 1
defaults:
  unknown_tool: {decision: require_approval, approvers: {roles: [admin]}}
people:
  erin:  {roles: []}         # the person the agent acts for
  alice: {roles: [admin]}    # an independent approver
serve:
  public_url: https://signoff.example/
tools:
  echo: {default: allow}
  slow: {default: allow}
  steps: {default: allow}
  seen: {default: allow}
  delete_file:
    default: require_approval
    approvers: {roles: [admin]}
    rules:
      - id: protect-root
        when: {args.path: /}
        decision: deny
        reason: never delete the root
      - id: scratch-is-quick
        when: {args.path: scratch}
        decision: require_approval
        approvers: {roles: [admin]}
        timeout: 1
  transfer:
    default: require_approval
    approvers: {roles: [admin]}
    allowed_decisions: [approve, edit, reject]
    editable_args: [amount]
    rules:
      - id: too-much
        when: {args.amount: {gt: 1000000}}
        decision: deny
        reason: above the hard limit
  write_note:
    default: require_approval
    forbid_self_approval: false      # a developer's own desktop: their in-client answer counts
  "b__*": {default: allow}
  ask_llm: {default: allow}
  ask_user: {default: allow}
  which_roots: {default: allow}
  announce: {default: allow}
  touch: {default: allow}
  big: {default: allow}
  crash: {default: allow}
  pid: {default: allow}
  a__delete_file:
    default: require_approval
    approvers: {roles: [admin]}
"""

#: Client modes: "auto" lands on 2026-07-28 in memory, "legacy" on 2025-11-25.
ERAS = pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])

Elicit = Callable[[Any, Any], Awaitable[types.ElicitResult]]


def make_policy(text: str = POLICY) -> Policy:
    return Policy.from_yaml(textwrap.dedent(text))


@pytest.fixture
async def gate() -> AsyncIterator[Gate]:
    g = Gate(make_policy(), MemoryStore())
    yield g
    await g.aclose()


@pytest.fixture
def upstream() -> tuple[Any, list[str]]:
    return make_upstream()


@asynccontextmanager
async def proxied(
    gate: Gate,
    upstream_server: Any,
    *,
    mode: str = "auto",
    elicit: Elicit | None = None,
    message_handler: Any = None,
    specs: list[UpstreamSpec] | None = None,
    sampling_callback: Any = None,
    list_roots_callback: Any = None,
    logging_callback: Any = None,
    **options: Any,
) -> AsyncIterator[Client]:
    """A real MCP client talking to the proxy in memory, the proxy to the upstream in memory."""
    opts = ProxyOptions(principal="erin", heartbeat_s=0.05, **options)
    proxy = build_proxy(gate, specs or [UpstreamSpec("", upstream_server)], opts)
    async with Client(
        proxy,
        mode=mode,
        elicitation_callback=elicit,
        message_handler=message_handler,
        sampling_callback=sampling_callback,
        list_roots_callback=list_roots_callback,
        logging_callback=logging_callback,
    ) as client:
        yield client


async def next_pending(gate: Gate, timeout: float = 10.0) -> ApprovalRequest:
    """The first pending request, once one exists (a test helper, not a timing assertion)."""
    with anyio.fail_after(timeout):
        while True:
            found = await gate.alist(status="pending")
            if found:
                return found[0]
            await anyio.sleep(0.01)


async def approve_next(gate: Gate, approver: str = "alice", **decision: Any) -> ApprovalRequest:
    req = await next_pending(gate)
    return await gate.adecide(req.id, [{"type": "approve", **decision}], approver=approver)


async def events_of(store: Store, request_id: str) -> list[str]:
    from signoff.store import AuditQuery

    await store.flush_audit()
    return [r.event for r in await store.read_audit(AuditQuery(request_id=request_id))]


def text_of(result: types.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def until(predicate: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    with anyio.fail_after(timeout):
        while not await predicate():
            await anyio.sleep(0.01)


async def abandon_when(
    call: Callable[[], Awaitable[Any]], ready: Callable[[], Awaitable[Any]]
) -> None:
    """Start `call`, and give it up (the SDK sends notifications/cancelled) once `ready` returns.

    Tests of cancellation must not abandon on a fixed client timeout: on a slow machine that
    fires before the server has stored or started anything.
    """
    async with anyio.create_task_group() as tg:
        scope = anyio.CancelScope()

        async def run() -> None:
            with scope:
                await call()

        tg.start_soon(run)
        await ready()
        scope.cancel()
