"""An app access token fetched with the app's id and secret, cached until shortly before it
expires (Feishu's ``tenant_access_token``, DingTalk's ``accessToken``: both last about two
hours and both platforms rate-limit fetching them)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

Fetch = Callable[["httpx.AsyncClient"], Awaitable[tuple[str, float]]]


class CachedToken:
    """``await get(http)`` returns a valid token; ``clear()`` after the platform refused it.
    Two concurrent first calls may both fetch — harmless, both tokens are valid."""

    def __init__(self, fetch: Fetch, margin_s: float = 300.0) -> None:
        self._fetch = fetch
        self._margin_s = margin_s
        self._value: str | None = None
        self._until = 0.0

    async def get(self, http: httpx.AsyncClient) -> str:
        if self._value is None or time.monotonic() >= self._until:
            value, lifetime_s = await self._fetch(http)
            self._value = value
            self._until = time.monotonic() + max(0.0, lifetime_s - self._margin_s)
        return self._value

    def clear(self) -> None:
        self._value = None
