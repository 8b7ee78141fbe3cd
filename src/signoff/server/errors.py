"""Errors as HTTP answers: one JSON shape, one status per error type.

``{"error": "already_decided", "message": "...", "by": "bob", "at": "...", "outcome": ...}``
— ``error`` is a stable code for programs, ``message`` says what to do next, and the
optional ``field`` names the offending part of the body (``decisions[0].type``).
"""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from signoff.model import (
    AlreadyDecided,
    AlreadyExecuted,
    DecisionError,
    IdempotencyConflict,
    InvalidInput,
    NotAuthorized,
    NotFound,
    RequestQuarantined,
    SignoffError,
    StoreError,
)
from signoff.server.responses import FastJSONResponse as JSONResponse


class ApiError(Exception):
    """An HTTP error with a stable code; raised by handlers, rendered by :func:`json_error`."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}
        self.extra = {k: v for k, v in extra.items() if v is not None}
        super().__init__(message)

    def body(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, **self.extra}


def unauthorized(message: str) -> ApiError:
    return ApiError(401, "unauthorized", message, headers={"WWW-Authenticate": "Bearer"})


def forbidden(message: str) -> ApiError:
    return ApiError(403, "forbidden", message)


def invalid(message: str, field: str) -> ApiError:
    return ApiError(422, "invalid", message, field=field)


def from_signoff_error(exc: SignoffError) -> ApiError:
    """Map the core's error types onto HTTP (fail closed: store trouble is a 503)."""
    if isinstance(exc, NotAuthorized):
        return ApiError(403, "not_authorized", str(exc.message), field=exc.field)
    if isinstance(exc, DecisionError):
        return ApiError(422, "invalid_decision", str(exc.message), field=exc.field)
    if isinstance(exc, InvalidInput):  # refused at the door (limits): nothing was stored
        return ApiError(422, "invalid", exc.message, field=exc.field)
    if isinstance(exc, AlreadyDecided):
        return ApiError(
            409,
            "already_decided",
            str(exc),
            request_id=exc.request_id,
            by=exc.by,
            at=exc.at.isoformat() if exc.at else None,
            outcome=exc.outcome,
        )
    if isinstance(exc, AlreadyExecuted):
        return ApiError(409, "already_executed", exc.message, tool_call_id=exc.call_id)
    if isinstance(exc, IdempotencyConflict):
        return ApiError(409, "idempotency_conflict", str(exc))
    if isinstance(exc, NotFound):
        return ApiError(404, "not_found", str(exc))
    if isinstance(exc, RequestQuarantined):  # one unreadable row; the store itself is fine
        return ApiError(409, "quarantined", str(exc), request_id=exc.request_id)
    if isinstance(exc, StoreError):
        return ApiError(503, "store_unavailable", f"the store is unavailable: {exc}")
    return ApiError(400, "bad_request", str(exc))


def json_error(error: ApiError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


async def handle_api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return json_error(exc)


async def handle_signoff_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SignoffError)
    return json_error(from_signoff_error(exc))


async def handle_internal_error(request: Request, exc: Exception) -> Response:
    """A bug, not bad input: the same JSON shape, no details (uvicorn logs the traceback)."""
    return json_error(
        ApiError(
            500,
            "internal_error",
            "the server failed on this request; its log has the details",
            headers={"Connection": "close"},
        )
    )


async def handle_http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 in the same JSON shape (keeping ``Allow`` on a 405)."""
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    if exc.status_code == 404:
        message = f"no route {request.url.path}; see /openapi.json"
    else:
        message = str(exc.detail)
    return json_error(ApiError(exc.status_code, code, message, headers=dict(exc.headers or {})))
