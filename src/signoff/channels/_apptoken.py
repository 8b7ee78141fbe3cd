"""An app access token fetched with the app's id and secret, cached until shortly before it
expires (Feishu's ``tenant_access_token``, DingTalk's ``accessToken``: both last about two
hours and both platforms rate-limit fetching them)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from signoff.channels import DeliveryError

if TYPE_CHECKING:
    import httpx

Fetch = Callable[["httpx.AsyncClient"], Awaitable[tuple[str, float]]]


class CachedToken:
    """``await get(http)`` returns a valid token; ``clear()`` after the platform refused it.
    Concurrent callers on one event loop share one fetch."""

    def __init__(self, fetch: Fetch, margin_s: float = 300.0) -> None:
        self._fetch = fetch
        self._margin_s = margin_s
        self._value: str | None = None
        self._until = 0.0
        self._lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    def _valid(self) -> str | None:
        return self._value if time.monotonic() < self._until else None

    async def get(self, http: httpx.AsyncClient) -> str:
        value = self._valid()
        if value is not None:
            return value
        async with self._lock_here():
            value = self._valid()
            if value is None:
                value, lifetime_s = await self._fetch(http)
                self._value = value
                self._until = time.monotonic() + max(0.0, lifetime_s - self._margin_s)
            return value

    def _lock_here(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock[0] is not loop:
            self._lock = (loop, asyncio.Lock())
        return self._lock[1]

    def clear(self) -> None:
        self._value, self._until = None, 0.0


def token_in(data: dict[str, Any], key: str, expires_key: str, channel: str) -> tuple[str, float]:
    """The token and its lifetime in seconds from a platform's token response (600 s when
    it gives none); a response without a token is a retryable delivery error."""
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise DeliveryError(f"{channel} token: no {key}", retryable=True)
    expires = data.get(expires_key)
    return value, float(expires) if isinstance(expires, int | float) else 600.0
