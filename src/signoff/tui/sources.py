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
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import Future
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
    #: What the grants the last decision created cover, each with its exact expiry.
    granted: list[str]

    async def open(self) -> None:
        """Start hearing changes (before the first :meth:`pending`, so none is missed)."""
        ...

    async def pending(self) -> list[ApprovalRequest]: ...

    def track(self, request_id: str) -> None:
        """Make sure the end of this listed request is heard."""
        ...

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
        self.granted: list[str] = []
        self._heard: asyncio.Queue[ApprovalRequest] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._remove: Callable[[], None] | None = None
        self._tracked: dict[str, Future[ApprovalRequest]] = {}

    async def open(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.gate._portal.call(self.gate.astart())
        self._remove = self.gate.store.add_listener(lambda req, _event: self._put(req))

    def _put(self, req: ApprovalRequest) -> None:
        """From any thread (the store's writer or watcher, the gate's loop)."""
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the app's loop is closed
                self._loop.call_soon_threadsafe(self._heard.put_nowait, req)

    def track(self, request_id: str) -> None:
        """The store's own wait (push, and it re-reads after registering) also reports the
        end of a request decided while the listener was starting up."""
        if request_id in self._tracked:
            return
        future = self.gate._portal.submit(self.gate.store.wait(request_id))
        self._tracked[request_id] = future

        def ended(done: Future[ApprovalRequest]) -> None:
            self._tracked.pop(request_id, None)
            if not done.cancelled() and done.exception() is None:
                self._put(done.result())

        future.add_done_callback(ended)

    async def pending(self) -> list[ApprovalRequest]:
        return await self.gate._portal.call(self.gate.alist(status="pending", limit=PAGE))

    async def get(self, request_id: str) -> ApprovalRequest:
        return await self.gate._portal.call(self.gate.get(request_id))

    async def decide(
        self, request_id: str, decisions: Sequence[Mapping[str, Any]]
    ) -> ApprovalRequest:
        work = self.gate.adecide(request_id, decisions, approver=self.me, channel="cli")
        req = await self.gate._portal.call(work)
        ids = [d.grant_id for d in req.decisions if d.grant_id and d.approver == self.me]
        self.granted = []
        for grant_id in dict.fromkeys(ids):
            grant = await self.gate._portal.call(self.gate.store.get_grant(grant_id))
            if grant is not None and grant.source_request == request_id:
                self.granted.append(grant.describe())
        return req

    async def changes(self) -> AsyncIterator[ApprovalRequest]:
        while True:
            yield await self._heard.get()

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
        if self._remove is not None:
            self._remove()
            self._remove = None
        for future in list(self._tracked.values()):
            future.cancel()


class ServerSource:
    """A signoff server as the approver token's person; live through ``GET /v1/events``."""

    def __init__(self, api: ApiClient, url: str, policy: Policy | None = None) -> None:
        self.api = api
        self.me: str | None = None  # from GET /v1/me (or the first decision recorded)
        self.roles: frozenset[str] | None = None
        self.policy = policy
        self.where = url
        self.granted: list[str] = []
        self._tracked: set[str] = set()

    async def open(self) -> None:
        """Learn who the token is (the event stream connects in changes())."""
        with contextlib.suppress(SignoffError):  # an older server: learnt from a decision
            who = await self.api.call("GET", "/v1/me", retry=True)
            self.me, self.roles = str(who["name"]), frozenset(who.get("roles") or ())

    def track(self, request_id: str) -> None:
        self._tracked.add(request_id)

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
        self.granted = [str(g.get("description")) for g in data.get("grants") or []]
        if req.decisions:
            self.me = req.decisions[-1].approver
        return req

    async def changes(self) -> AsyncIterator[ApprovalRequest]:
        """Every request an event names, re-read (an event carries no arguments). Once the
        stream is connected (and again after each reconnect) the tracked requests and the
        pending list are re-read, so nothing decided or created meanwhile is missed."""
        broken: tuple[type[Exception], ...] = (
            OSError,
            SignoffError,
            _StreamEnded,
            *self._transport_errors(),
        )
        while True:
            try:
                async for request_id in self._event_ids():
                    if request_id is None:  # connected: catch up
                        async for req in self._catch_up():
                            yield req
                        continue
                    with contextlib.suppress(SignoffError):
                        yield await self.get(request_id)
            except broken:
                pass
            await asyncio.sleep(RECONNECT_SECONDS)

    async def _catch_up(self) -> AsyncIterator[ApprovalRequest]:
        with contextlib.suppress(SignoffError):
            for request_id in list(self._tracked):
                req = await self.get(request_id)
                if not req.pending:
                    self._tracked.discard(request_id)
                yield req
            for req in await self.pending():
                yield req

    async def _event_ids(self) -> AsyncIterator[str | None]:
        """The ids the stream names; None once, when it is connected."""
        client = self.api._client
        headers = {"Accept": "text/event-stream"}
        async with client.stream("GET", "/v1/events", headers=headers, timeout=None) as resp:
            if resp.status_code >= 400:
                raise _StreamEnded(resp.status_code)
            async for line in resp.aiter_lines():
                if line.startswith(": connected"):
                    yield None
                elif line.startswith("data:"):
                    with contextlib.suppress(ValueError, KeyError, TypeError):
                        yield str(json.loads(line[5:])["id"])
        raise _StreamEnded("closed")

    @staticmethod
    def _transport_errors() -> tuple[type[Exception], ...]:
        import httpx  # the signoff[client] extra, present when a ServerSource exists

        return (httpx.HTTPError,)

    def needs_me(self, req: ApprovalRequest) -> list[str] | None:
        """From the token's person and roles (``GET /v1/me``; with an older server, the first
        decision's approver and ``--config``'s roles); else None — the server still decides."""
        if self.me is None:
            return None
        if self.roles is not None:
            return menu.needs_person(req, self.me, self.roles)
        if self.policy is None:
            return None
        return menu.needs_person(req, self.me, self.policy.roles_of(self.me))

    def grant_text(self, req: ApprovalRequest, call_id: str) -> str:
        """The server sets the expiry (its ``grants.default_ttl``); the scope is exactly this."""
        action = req.action_request(call_id)
        cfg = req.config(call_id)
        if not cfg.allow_thread_approval or not cfg.approvers.needs_one:
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
