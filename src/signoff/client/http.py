"""The wire under :class:`~signoff.client.RemoteGate`: httpx, the agent token, retries,
and the server's JSON errors turned back into signoff's exception types.

Retries are only for what is safe to repeat: reads, waits, and submitting a step (the
server is idempotent on tool-call ids). A decision, a cancel or an execution claim is sent
once — if its answer is lost, the caller gets a :class:`StoreError` and the tool does not
run (fail closed).
"""

from __future__ import annotations

import asyncio
import random
import time
from datetime import datetime
from typing import Any

import httpx

from signoff.model import (
    AlreadyDecided,
    AlreadyExecuted,
    DecisionError,
    IdempotencyConflict,
    NotAuthorized,
    NotFound,
    SignoffError,
    StoreError,
)

RETRY_STATUSES = frozenset({502, 503, 504})


class Unauthorized(SignoffError):
    """The server did not accept the token (unknown, revoked, or none sent)."""


class ServerUnavailable(StoreError):
    """The server could not be reached (or kept failing) within the retry budget."""


def error_for(response: httpx.Response) -> SignoffError:
    """The exception a local gate would have raised for this error answer."""
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    code = str(body.get("error", ""))
    message = str(body.get("message") or f"HTTP {response.status_code}")
    field = body.get("field")
    status = response.status_code
    if status == 401:
        return Unauthorized(message)
    if status == 403:
        return NotAuthorized(message, field=field)
    if status == 404:
        return NotFound(message)
    if status == 409 and code == "already_decided":
        at = body.get("at")
        return AlreadyDecided(
            message,
            request_id=str(body.get("request_id") or ""),
            by=body.get("by"),
            at=datetime.fromisoformat(at) if isinstance(at, str) else None,
            outcome=body.get("outcome"),
        )
    if status == 409 and code == "already_executed":
        return AlreadyExecuted(message, call_id=body.get("tool_call_id"))
    if status == 409:
        return IdempotencyConflict(message)
    if status == 422:
        return DecisionError(message, field=field)
    if status >= 500:
        return StoreError(f"signoff server error {status}: {message}")
    return SignoffError(f"HTTP {status}: {message}")


class ApiClient:
    """One ``httpx.AsyncClient`` (lives on the RemoteGate's private loop)."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 30.0,
        retry_for: float = 30.0,
        max_connections: int = 100,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.retry_for = retry_for
        self._client = httpx.AsyncClient(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token}", "User-Agent": "signoff-remote-gate"},
            timeout=timeout,
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        timeout: float | None = None,
        retry: bool = False,
    ) -> Any:
        """Send one request; with ``retry``, repeat transport errors and 502/503/504 with
        jittered backoff for up to ``retry_for`` seconds."""
        give_up = time.monotonic() + self.retry_for
        pause = 0.2
        while True:
            try:
                response = await self._client.request(
                    method, path, json=json, params=params, timeout=timeout or self.timeout
                )
            except httpx.TransportError as exc:
                if not retry or time.monotonic() + pause > give_up:
                    raise ServerUnavailable(
                        f"signoff server {self.url} unreachable: {type(exc).__name__}: {exc}"
                    ) from exc
            else:
                if response.status_code < 400:
                    return response.json()
                if not retry or response.status_code not in RETRY_STATUSES:
                    raise error_for(response)
                if time.monotonic() + pause > give_up:
                    raise error_for(response)
            await asyncio.sleep(pause * random.uniform(0.5, 1.5))
            pause = min(pause * 2, 5.0)
