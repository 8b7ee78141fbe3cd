"""``RemoteGate``: the :class:`~signoff.Gate` API for agents whose gate is a server.

Same names as the local gate — ``guard``, ``context``, ``asubmit``/``submit``,
``await_request``/``wait``, ``adecide``/``decide``, ``acancel``/``cancel``, ``aask``/``ask``,
``arun_approved`` — talking to ``signoff serve`` with an agent token. Policy, store, audit
and notifications live on the server; this object only carries calls there and back.

The API masks secret-named arguments for every caller; a remote gate keeps the arguments it
sent (per request and call) and puts them back where the server shows a mask, so the calls
it runs carry the real values (:func:`signoff.policy.redact.restore`).

Waiting is a long-poll (``GET /v1/requests/{id}/wait?timeout=25``) repeated until the
request is terminal: hours of waiting cost one cheap request every ~25 s, the answer comes
the moment the server commits the decision, and a dropped connection or a restarted server
is retried with backoff instead of failing the agent.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from signoff.client.guard import remote_guard
from signoff.client.http import ApiClient
from signoff.client.settings import remote_settings
from signoff.gate.context import ContextMethods, current_context
from signoff.gate.core import resolve_config_path
from signoff.gate.guard import raise_for
from signoff.gate.ledger import run_once
from signoff.gate.portal import Portal
from signoff.model import (
    ApprovalRequest,
    CallContext,
    Decision,
    SignoffError,
    ToolCall,
    Verdict,
)
from signoff.policy import Policy
from signoff.policy.redact import restore

T = TypeVar("T")
_REQUEST_FIELDS = frozenset(ApprovalRequest.model_fields)
SENT_KEPT = 10_000  # calls whose arguments a remote gate remembers (oldest forgotten first)


def parse_request(data: Mapping[str, Any]) -> ApprovalRequest:
    """An :class:`ApprovalRequest` from the API's superset JSON."""
    return ApprovalRequest.model_validate({k: v for k, v in data.items() if k in _REQUEST_FIELDS})


def context_json(ctx: CallContext) -> dict[str, Any]:
    body: dict[str, Any] = {
        "principal": {"id": ctx.principal.id, "roles": sorted(ctx.principal.roles)},
        "thread": ctx.thread,
        "agent": ctx.agent,
        "environment": ctx.environment,
        "user_request": ctx.user_request,
        "reasoning": ctx.reasoning,
        "attrs": dict(ctx.attrs),
    }
    return {k: v for k, v in body.items() if v is not None}


def _long_poll(request_id: str, budget: float) -> Callable[[ApiClient], Awaitable[Any]]:
    def call(api: ApiClient) -> Awaitable[Any]:
        return api.call(
            "GET",
            f"/v1/requests/{request_id}/wait",
            params={"timeout": round(budget, 3)},
            timeout=budget + api.timeout,
            retry=True,
        )

    return call


class RemoteSubmission:
    """The server's answer to one step: a verdict per call, and the request if any."""

    def __init__(
        self,
        calls: list[ToolCall],
        verdicts: list[Verdict],
        request: ApprovalRequest | None,
        request_id: str | None = None,
        stored_ids: dict[str, str] | None = None,
    ) -> None:
        self.calls = calls
        self.verdicts = verdicts
        self.request = request
        self.request_id = request.id if request is not None else request_id
        self.stored_ids = stored_ids or {}

    def stored_id(self, call_id: str) -> str:
        """The call's id in the request (another one when the server re-attached this step
        to the request asked before the agent restarted)."""
        return self.stored_ids.get(call_id, call_id)

    def verdict_for(self, call_id: str) -> Verdict:
        for call, verdict in zip(self.calls, self.verdicts, strict=True):
            if call.id == call_id:
                return verdict
        raise KeyError(call_id)


class RemoteGate(ContextMethods):
    """A gate whose policy, store and approvers are on a ``signoff serve`` server."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        poll_timeout: float = 25.0,
        timeout: float = 30.0,
        max_connections: int = 100,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.poll_timeout = poll_timeout
        self._portal = Portal("signoff-remote-gate")
        self._api_args: dict[str, Any] = {
            "timeout": timeout,
            "retry_for": max(timeout, 30.0),
            "max_connections": max_connections,
            "transport": transport,
        }
        self._token = token
        self._api: ApiClient | None = None
        self._closed = False
        self._steps_seen: set[tuple[str, str | None]] = set()
        self._sent: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_config(cls, path: str | os.PathLike[str] | None = None, **kwargs: Any) -> RemoteGate:
        """A remote gate from the ``remote:`` section of ``signoff.yaml``."""
        policy = Policy.load(resolve_config_path(path))
        section = policy.sections.get("remote")
        if not section:
            raise SignoffError("this config has no `remote: {url: …, token: …}` section")
        return cls.from_section(section, **kwargs)

    @classmethod
    def from_section(cls, section: Mapping[str, Any], **kwargs: Any) -> RemoteGate:
        settings = remote_settings(section)
        options: dict[str, Any] = {
            "poll_timeout": settings.poll_timeout,
            "timeout": settings.timeout,
            **kwargs,
        }
        return cls(settings.url, settings.token, **options)

    # ------------------------------------------------------------------ plumbing
    async def _on_portal(self, make: Callable[[ApiClient], Awaitable[T]]) -> T:
        """Run ``make(api)`` on the private loop that owns the HTTP client."""

        async def run() -> T:
            if self._closed:
                raise SignoffError("this remote gate is closed")
            if self._api is None:
                self._api = ApiClient(self.url, self._token, **self._api_args)
            return await make(self._api)

        fut = self._portal.submit(run())
        return await asyncio.wrap_future(fut)

    def _run(self, coro: Awaitable[T]) -> T:
        async def wrapper() -> T:
            return await coro

        return self._portal.run(wrapper())

    def guard(self, fn: Any = None, **options: Any) -> Any:
        """Decorator gating a sync or async function through the server."""
        return remote_guard(self, fn, **options)

    # ------------------------------------------------------------------ submit
    async def asubmit(
        self, calls: Sequence[ToolCall], ctx: CallContext | None = None, *, fetch: bool = True
    ) -> RemoteSubmission:
        """Send one agent step; the server answers a verdict per call (retried safely: the
        server is idempotent on tool-call ids). ``fetch=False`` skips reading the stored
        request (``request_id`` is still set)."""
        ctx = ctx if ctx is not None else current_context()
        body: dict[str, Any] = {
            "tool_calls": [{"id": c.id, "name": c.name, "args": dict(c.args)} for c in calls],
            "context": context_json(ctx),
        }
        step = (ctx.thread, ctx.agent)
        if step not in self._steps_seen:  # first step per thread: a restart may have preceded
            self._steps_seen.add(step)
            body["reattach"] = True
        data = await self._on_portal(
            lambda api: api.call("POST", "/v1/requests", json=body, retry=True)
        )
        verdicts = [
            Verdict(v["verdict"], v["rule"], reason=v.get("reason")) for v in data["verdicts"]
        ]
        request_id = data.get("id")
        sub = RemoteSubmission(list(calls), verdicts, None, request_id, data.get("stored_ids"))
        if request_id:
            for call in calls:
                self._remember(request_id, sub.stored_id(call.id), call.args)
        if request_id and fetch:
            sub.request = await self.get(request_id)
        return sub

    def _remember(self, request_id: str, call_id: str, args: Mapping[str, Any]) -> None:
        self._sent[(request_id, call_id)] = dict(args)
        self._sent.move_to_end((request_id, call_id))
        while len(self._sent) > SENT_KEPT:
            self._sent.popitem(last=False)

    def _parse(self, data: Mapping[str, Any]) -> ApprovalRequest:
        """The request as the server sent it, with the arguments this gate sent put back
        where the server shows them masked."""
        req = parse_request(data)
        for action, state in zip(req.action_requests, req.calls, strict=True):
            sent = self._sent.get((req.id, action.tool_call_id))
            if sent is not None:
                action.args = restore(action.args, sent)
                state.action.args = restore(state.action.args, sent)
        return req

    def submit(self, calls: Sequence[ToolCall], ctx: CallContext | None = None) -> RemoteSubmission:
        ctx = ctx if ctx is not None else current_context()
        return self._run(self.asubmit(calls, ctx))

    # ------------------------------------------------------------------ read and wait
    async def get(self, request_id: str) -> ApprovalRequest:
        data = await self._on_portal(
            lambda api: api.call("GET", f"/v1/requests/{request_id}", retry=True)
        )
        return self._parse(data)

    async def alist(
        self,
        *,
        status: str | None = None,
        thread: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[ApprovalRequest]:
        wanted = {"status": status, "thread": thread, "kind": kind}
        params: dict[str, Any] = {k: v for k, v in wanted.items() if v is not None}
        params |= {"limit": limit, "offset": offset}
        data = await self._on_portal(
            lambda api: api.call("GET", "/v1/requests", params=params, retry=True)
        )
        return [self._parse(r) for r in data["requests"]]

    async def await_request(self, request_id: str, timeout: float | None = None) -> ApprovalRequest:
        """Long-poll until the request is terminal (or ``timeout`` passes): one request per
        ``poll_timeout`` seconds, reconnecting with backoff if the connection drops."""
        give_up = None if timeout is None else time.monotonic() + timeout
        while True:
            budget = self.poll_timeout
            if give_up is not None:
                budget = max(0.0, min(budget, give_up - time.monotonic()))
            req = self._parse(await self._on_portal(_long_poll(request_id, budget)))
            if req.terminal or (give_up is not None and time.monotonic() >= give_up):
                return req

    def wait(self, request_id: str, timeout: float | None = None) -> ApprovalRequest:
        return self._run(self.await_request(request_id, timeout))

    # ------------------------------------------------------------------ decide / cancel
    async def adecide(
        self,
        request_id: str,
        decisions: Sequence[Decision | Mapping[str, Any]],
        *,
        approver: str | None = None,
        channel: str = "api",
    ) -> ApprovalRequest:
        """Decide with an approver token; the server records the token's person, so
        ``approver`` (if given) is only checked against the answer."""
        body = [
            d.model_dump(mode="json", exclude_none=True) if isinstance(d, Decision) else dict(d)
            for d in decisions
        ]
        data = await self._on_portal(
            lambda api: api.call(
                "POST", f"/v1/requests/{request_id}/decisions", json={"decisions": body}
            )
        )
        return self._parse(data)

    def decide(
        self,
        request_id: str,
        decisions: Sequence[Decision | Mapping[str, Any]],
        *,
        approver: str | None = None,
        channel: str = "api",
    ) -> ApprovalRequest:
        return self._run(self.adecide(request_id, decisions, approver=approver, channel=channel))

    async def acancel(self, request_id: str, *, reason: str | None = None) -> ApprovalRequest:
        data = await self._on_portal(
            lambda api: api.call(
                "POST", f"/v1/requests/{request_id}/cancel", json={"reason": reason}
            )
        )
        return self._parse(data)

    def cancel(self, request_id: str, *, reason: str | None = None) -> ApprovalRequest:
        return self._run(self.acancel(request_id, reason=reason))

    # ------------------------------------------------------------------ execution ledger
    async def _execution(
        self, request_id: str, call_id: str, state: str, error: str | None = None
    ) -> None:
        body = {"state": state, "error": error}
        await self._on_portal(
            lambda api: api.call(
                "POST",
                f"/v1/requests/{request_id}/calls/{call_id}/execution",
                json=body,
                retry=state != "executing",  # finishing twice is refused harmlessly
            )
        )

    async def aclaim(self, request_id: str, call_id: str) -> None:
        """Mark an approved call ``executing`` (AlreadyExecuted on a second claim)."""
        await self._execution(request_id, call_id, "executing")

    async def afinish(self, request_id: str, call_id: str, *, error: str | None = None) -> None:
        await self._execution(request_id, call_id, "failed" if error else "executed", error)

    async def arun_approved(
        self,
        req: ApprovalRequest,
        call_id: str,
        run: Callable[[dict[str, Any]], Awaitable[Any]],
        ctx: CallContext | None = None,
    ) -> Any:
        """Run an approved/edited call exactly once with its final arguments."""
        return await run_once(req, call_id, run, claim=self.aclaim, finish=self.afinish)

    # ------------------------------------------------------------------ inquiries
    async def aask(
        self,
        question: str | None = None,
        *,
        choices: Sequence[str] | None = None,
        default_answer: str | None = None,
        allow_other: bool = False,
        questions: Sequence[Mapping[str, Any]] | None = None,
        format: str = "text",
        timeout: float = 3600.0,
        ctx: CallContext | None = None,
        wait: bool = True,
    ) -> str | dict[str, Any] | ApprovalRequest:
        """Ask a human; returns the answer — for ``questions``, a dict keyed by question id —
        (raises Rejected/Expired like :meth:`Gate.aask`)."""
        ctx = ctx if ctx is not None else current_context()
        body: dict[str, Any] = {
            "question": question,
            "choices": list(choices) if choices else None,
            "default_answer": default_answer,
            "timeout": timeout,
            "context": context_json(ctx),
        }
        if allow_other:
            body["allow_other"] = True
        if questions is not None:
            body["questions"] = [dict(q) for q in questions]
        if format != "text":
            body["format"] = format
        data = await self._on_portal(lambda api: api.call("POST", "/v1/inquiries", json=body))
        req = self._parse(data)
        if not wait:
            return req
        req = await self.await_request(req.id)
        state = req.calls[0]
        if state.resolution == "responded":
            if req.inquiry is not None and req.inquiry.is_form:
                return dict(state.answers or {})
            return state.message or ""
        raise_for(req, state)

    def ask(
        self, question: str | None = None, **kwargs: Any
    ) -> str | dict[str, Any] | ApprovalRequest:
        return self._run(self.aask(question, **kwargs))

    # ------------------------------------------------------------------ lifecycle
    async def aclose(self) -> None:
        if self._closed:
            return
        await self._on_portal(lambda api: api.aclose())
        self._closed = True
        await asyncio.to_thread(self._portal.stop)

    def close(self) -> None:
        if self._closed:
            return
        if self._api is not None:
            self._portal.run(self._api.aclose())
        self._closed = True
        self._portal.stop()

    def __enter__(self) -> RemoteGate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> RemoteGate:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"RemoteGate({self.url!r})"
