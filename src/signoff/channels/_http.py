"""One HTTP call to a provider, with its failure sorted into retry-later or give-up.

Retry: connection errors and timeouts, 408, 425, 429, 5xx — after ``Retry-After`` (seconds
or an HTTP date) when the provider sent one. Everything else is final: a 400 will not get
better by asking again, and 401/403/404 repeated count against providers' abuse limits.
Error texts never include the URL (Discord and Teams URLs carry their secret).
"""

from __future__ import annotations

import email.utils
import functools
import ssl
import time
from collections.abc import Mapping
from typing import Any

import httpx

from signoff.channels import DeliveryError
from signoff.channels.redact import cut

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


@functools.cache
def tls() -> ssl.SSLContext:
    """One TLS context (httpx's default: certifi, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``)
    for the short-lived clients that answer from inside a callback. Building one loads the CA
    bundle, about 30 ms of CPU; a shared one costs nothing per client."""
    return httpx.create_ssl_context()


def retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header: delta-seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


async def request(
    http: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    what: str,
    json: Any = None,
    content: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, str] | None = None,
    ok: frozenset[int] = frozenset(),
) -> httpx.Response:
    """Send; return the response when it is 2xx (or in ``ok``), else raise DeliveryError."""
    try:
        response = await http.request(
            method, url, json=json, content=content, headers=headers, params=params
        )
    except httpx.TimeoutException:
        raise DeliveryError(f"{what}: timed out", retryable=True) from None
    except httpx.TransportError as exc:
        raise DeliveryError(f"{what}: {type(exc).__name__}: {exc}", retryable=True) from None
    status = response.status_code
    if 200 <= status < 300 or status in ok:
        return response
    raise status_error(what, response)


def status_error(what: str, response: httpx.Response) -> DeliveryError:
    status = response.status_code
    wait = retry_after(response.headers.get("retry-after"))
    if status == 429:
        wait = _json_retry_after(response, wait)
    body = cut(response.text.strip().replace("\n", " "), 200)
    return DeliveryError(
        f"{what}: HTTP {status}" + (f": {body}" if body else ""),
        retryable=status in RETRY_STATUSES,
        retry_after=wait,
    )


def _json_retry_after(response: httpx.Response, fallback: float | None) -> float | None:
    """Discord also says ``{"retry_after": 0.25}`` in the body (more precise than the header)."""
    try:
        data = response.json()
    except ValueError:
        return fallback
    value = data.get("retry_after") if isinstance(data, dict) else None
    return float(value) if isinstance(value, int | float) and value >= 0 else fallback
