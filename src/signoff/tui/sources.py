"""Where ``signoff watch`` reads and decides: the local store, or a signoff server.

Both give the app the same five things — the pending requests, one request, a decision, a
stream of changed requests, and the sentence of a grant before it is made — so the screens
never know which one they talk to. Decisions go through :meth:`Gate.adecide` or
``POST /v1/requests/{id}/decisions``: the same validation as the CLI and the API.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from signoff.channels import menu
from signoff.gate import Gate
from signoff.gate.granting import grant_from_decision
from signoff.model import ApprovalRequest, SignoffError
from signoff.model.grants import GrantRequest

if TYPE_CHECKING:
    from signoff.client.http import ApiClient
    from signoff.policy import Policy

PAGE = 100
#: How long the event stream waits before reconnecting after the server went away.
RECONNECT_SECONDS = 2.0


class Source(Protocol):
    """What the inbox needs from where it reads and decides."""

    #: Who decides (``--as``), or None when only the server knows (its token's person).
    me: str | None
    policy: Policy | None
    where: str

    async def pending(self) -> list[ApprovalRequest]: ...

    async def get(self, request_id: str) -> ApprovalRequest: ...

    async def decide(
        self, request_id: str, decisions: Sequence[Mapping[str, Any]]
    ) -> ApprovalRequest: ...

    def changes(self) -> AsyncIterator[ApprovalRequest]: ...

    def needs_me(self, req: ApprovalRequest) -> list[str] | None:
        """The calls ``me`` may decide now (None: unknown)."""
        ...

    def grant_text(self, req: ApprovalRequest, call_id: str) -> str: ...

    async def close(self) -> None: ...


class LocalSource:
    """The local store, deciding as ``--as`` (the CLI's gate records the OS user too); live
    through the store's change listener, which also hears other processes' commits."""

    def __init__(self, gate: Gate, me: str) -> None:
        self.gate = gate
        self.me: str | None = me
        self.policy: Policy | None = gate.policy
        self.where = "local store"

    async def pending(self) -> list[ApprovalRequest]:
        return await self.gate._portal.call(self.gate.alist(status="pending", limit=PAGE))

    async def get(self, request_id: str) -> ApprovalRequest:
        return await self.gate._portal.call(self.gate.get(request_id))

    async def decide(
        self, request_id: str, decisions: Sequence[Mapping[str, Any]]
    ) -> ApprovalRequest:
        work = self.gate.adecide(request_id, decisions, approver=self.me, channel="cli")
        return await self.gate._portal.call(work)

    async def changes(self) -> AsyncIterator[ApprovalRequest]:
        loop = asyncio.get_running_loop()
        changed: asyncio.Queue[ApprovalRequest] = asyncio.Queue()

        def heard(req: ApprovalRequest, _event: str) -> None:
            with contextlib.suppress(RuntimeError):  # the app's loop is closed
                loop.call_soon_threadsafe(changed.put_nowait, req)

        await self.gate._portal.call(self.gate.astart())
        remove = self.gate.store.add_listener(heard)
        try:
            while True:
                yield await changed.get()
        finally:
            remove()

    def needs_me(self, req: ApprovalRequest) -> list[str] | None:
        assert self.me is not None
        return menu.needs_person(req, self.me, self.gate.policy.roles_of(self.me))

    def grant_text(self, req: ApprovalRequest, call_id: str) -> str:
        """The grant approving ``call_id`` "for this thread" would create, built by the
        gate's own code (raises the gate's error where the policy forbids it)."""
        assert self.me is not None
        scope = GrantRequest(kind="thread")
        grant = grant_from_decision(self.gate, req, call_id, scope, self.me, None, "decision")
        return grant.describe()

    async def close(self) -> None:
        return None


class ServerSource:
    """A signoff server as the approver token's person; live through ``GET /v1/events``."""

    def __init__(self, api: ApiClient, url: str, policy: Policy | None = None) -> None:
        self.api = api
        self.me: str | None = None  # learnt from the first decision the server records
        self.policy = policy
        self.where = url

    async def pending(self) -> list[ApprovalRequest]:
        from signoff.client.remote import parse_request

        params: dict[str, Any] = {"status": "pending", "limit": PAGE, "offset": 0}
        found: list[ApprovalRequest] = []
        while len(found) < PAGE:
            page = await self.api.call("GET", "/v1/requests", params=params, retry=True)
            found += [parse_request(r) for r in page["requests"]]
            if page.get("next_offset") is None:
                break
            params["offset"] = page["next_offset"]
        return found

    async def get(self, request_id: str) -> ApprovalRequest:
        from signoff.client.remote import parse_request

        return parse_request(await self.api.call("GET", f"/v1/requests/{request_id}", retry=True))

    async def decide(
        self, request_id: str, decisions: Sequence[Mapping[str, Any]]
    ) -> ApprovalRequest:
        from signoff.client.remote import parse_request

        body = {"decisions": [{k: v for k, v in d.items() if v is not None} for d in decisions]}
        data = await self.api.call("POST", f"/v1/requests/{request_id}/decisions", json=body)
        req = parse_request(data)
        if req.decisions:
            self.me = req.decisions[-1].approver
        return req

    async def changes(self) -> AsyncIterator[ApprovalRequest]:
        """Every request an event names, re-read (an event carries no arguments); after the
        stream breaks, it reconnects and re-reads the pending list (nothing is missed)."""
        broken: tuple[type[Exception], ...] = (
            OSError,
            SignoffError,
            _StreamEnded,
            *self._transport_errors(),
        )
        while True:
            try:
                async for request_id in self._event_ids():
                    with contextlib.suppress(SignoffError):
                        yield await self.get(request_id)
            except broken:
                pass
            await asyncio.sleep(RECONNECT_SECONDS)
            with contextlib.suppress(SignoffError):
                for req in await self.pending():
                    yield req

    async def _event_ids(self) -> AsyncIterator[str]:
        client = self.api._client
        headers = {"Accept": "text/event-stream"}
        async with client.stream("GET", "/v1/events", headers=headers, timeout=None) as resp:
            if resp.status_code >= 400:
                raise _StreamEnded(resp.status_code)
            async for line in resp.aiter_lines():
                if line.startswith("data:"):
                    with contextlib.suppress(ValueError, KeyError, TypeError):
                        yield str(json.loads(line[5:])["id"])
        raise _StreamEnded("closed")

    @staticmethod
    def _transport_errors() -> tuple[type[Exception], ...]:
        import httpx  # the signoff[client] extra, present when a ServerSource exists

        return (httpx.HTTPError,)

    def needs_me(self, req: ApprovalRequest) -> list[str] | None:
        if self.me is None:
            return None
        roles = self.policy.roles_of(self.me) if self.policy is not None else ()
        return menu.needs_person(req, self.me, roles)

    def grant_text(self, req: ApprovalRequest, call_id: str) -> str:
        """The server sets the expiry (its ``grants.default_ttl``); the scope is exactly this."""
        action = req.action_request(call_id)
        cfg = req.config(call_id)
        if not cfg.allow_thread_approval or cfg.approvers.quorum > 1:
            raise SignoffError(f"a standing approval is not allowed for {action.name} here")
        return (
            f"also approve `{action.name}` calls under rule {action.rule} from "
            f"{req.agent or 'any agent'} for {req.principal.id} on thread {req.thread} "
            "until the server's grants.default_ttl from now (the exact expiry is shown "
            "once the server creates it)"
        )

    async def close(self) -> None:
        await self.api.aclose()


class _StreamEnded(Exception):
    """The event stream ended or was refused; reconnect."""
