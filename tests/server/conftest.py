"""A real server per test: uvicorn on 127.0.0.1, a free port, stopped at the end."""

from __future__ import annotations

import asyncio
import concurrent.futures
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from signoff import Gate, Policy
from signoff.server import ServerSettings, ServerThread, create_app, create_token
from signoff.server.links import LinkIssuer
from signoff.store import MemoryStore, SQLiteStore, Store

POLICY = """
version: 1
people:
  alice: {roles: [finance, admin], email: alice@example.com}
  bob:   {roles: [finance]}
  carol: {roles: [finance]}
  dave:  {roles: [ops]}
  erin:  {roles: [finance]}
  frank: {roles: []}
auth:
  admin_roles: [admin]
tools:
  get_price:
    default: allow
  transfer_funds:
    description: "Transfer {args.amount} to {args.to}"
    default: allow
    allowed_decisions: [approve, edit, reject]
    editable_args: [amount, memo]
    rules:
      - id: hard-limit
        when: {args.amount: {gt: 1000000}}
        decision: deny
        reason: above the hard limit
      - id: large-transfer
        when: {args.amount: {gt: 10000}}
        decision: require_approval
        approvers: {roles: [finance]}
        risk: high
        timeout: 10m
  pay_many:
    default: require_approval
    approvers: {roles: [finance], quorum: 2}
  deploy:
    default: require_approval
    approvers: {roles: [ops]}
    allowed_decisions: [approve, reject, respond]
"""

PEOPLE = ("alice", "bob", "carol", "dave", "erin", "frank")


def run_async(coro: Any) -> Any:
    """``asyncio.run`` on a fresh thread (Playwright's sync API keeps a loop on this one)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


class Server:
    """A running server plus tokens for one agent and every person."""

    def __init__(self, app: Any, thread: ServerThread, tokens: dict[str, str]) -> None:
        self.app = app
        self.thread = thread
        self.url = thread.url
        self.tokens = tokens
        self.gate: Gate = app.state.signoff.gate
        self.links: LinkIssuer = app.state.links
        self._clients: list[httpx.Client] = []

    def client(self, who: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"} if who else {}
        headers.update(kwargs.pop("headers", {}))
        kwargs.setdefault("timeout", 30)
        client = httpx.Client(base_url=self.url, headers=headers, **kwargs)
        self._clients.append(client)
        return client

    def submit(
        self,
        calls: list[dict[str, Any]],
        *,
        who: str = "bot",
        principal: str = "frank",
        thread: str = "t-1",
        **context: Any,
    ) -> httpx.Response:
        body = {
            "tool_calls": calls,
            "context": {"principal": {"id": principal}, "thread": thread, **context},
        }
        return self.client(who).post("/v1/requests", json=body)

    def pending(self, amount: int = 50_000, call_id: str = "call_1", **kw: Any) -> str:
        """Store a request needing one finance approval; returns its id."""
        r = self.submit(
            [{"id": call_id, "name": "transfer_funds", "args": {"amount": amount, "to": "ACME"}}],
            **kw,
        )
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    def run(self, coro: Any) -> Any:
        return run_async(coro)

    def close(self) -> None:
        for c in self._clients:
            c.close()
        self.thread.stop()


def start_server(
    store: Store, policy_text: str = POLICY, *, agent_trusted: bool = False, **settings: Any
) -> Server:
    policy = Policy.from_yaml(textwrap.dedent(policy_text))
    sections = {k: dict(v) for k, v in policy.sections.items()}
    for key, value in settings.items():
        sections.setdefault(key, {}).update(value)
    gate = Gate(policy, store)
    app = create_app(gate, ServerSettings.from_sections(sections), owns_gate=True)
    thread = ServerThread(app)
    thread.start()
    db = app.state.signoff.db

    async def tokens() -> dict[str, str]:
        out = {"bot": (await create_token(db, "agent", "bot", trusted_roles=agent_trusted))[0]}
        out["other-bot"] = (await create_token(db, "agent", "other-bot"))[0]
        for person in PEOPLE:
            out[person] = (await create_token(db, "approver", person))[0]
        return out

    return Server(app, thread, run_async(tokens()))


@pytest.fixture
def server() -> Iterator[Server]:
    srv = start_server(MemoryStore())
    yield srv
    srv.close()


@pytest.fixture
def sqlite_server(tmp_path: Path) -> Iterator[Server]:
    srv = start_server(SQLiteStore(tmp_path / "signoff.db"))
    yield srv
    srv.close()


def transfer(amount: int = 50_000, call_id: str = "call_1") -> dict[str, Any]:
    return {"id": call_id, "name": "transfer_funds", "args": {"amount": amount, "to": "ACME"}}
