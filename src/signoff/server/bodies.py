"""Reading request bodies and query strings into typed values, or a 422 naming the field."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from signoff.server.errors import invalid

M = TypeVar("M", bound=BaseModel)


async def json_body(request: Request, *, empty: Any = ...) -> Any:
    raw = await request.body()
    if not raw.strip():
        if empty is not ...:
            return empty
        raise invalid("the request body is empty; send JSON", "body")
    try:
        return json.loads(raw)
    except RecursionError:
        raise invalid("the request body is nested too deeply", "body") from None
    except ValueError as exc:  # bad JSON or UTF-8, or an integer over Python's 4300 digits
        why = "an integer has too many digits" if "digits" in str(exc) else str(exc)
        raise invalid(f"the request body is not valid JSON: {why}", "body") from None


def validated(model: type[M], data: Any) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "body"
        raise invalid(str(err["msg"]), field) from None


def query_int(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise invalid(f"{name} must be an integer", name) from None
    if not low <= value <= high:
        raise invalid(f"{name} must be between {low} and {high}", name)
    return value


def query_float(request: Request, name: str, default: float, low: float, high: float) -> float:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise invalid(f"{name} must be a number of seconds", name) from None
    if not low <= value <= high:  # also refuses NaN
        raise invalid(f"{name} must be between {low:g} and {high:g}", name)
    return value


def query_choice(request: Request, name: str, choices: tuple[str, ...]) -> str | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if raw not in choices:
        raise invalid(f"{name} must be one of {', '.join(choices)}", name)
    return raw


def query_time(request: Request, name: str) -> datetime | None:
    raw = request.query_params.get(name)
    if not raw:
        return None
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        raise invalid(f"{name} must be an ISO-8601 time like 2025-01-31T12:00:00Z", name) from None
    if value.tzinfo is None:
        raise invalid(f"{name} needs a time zone (add Z for UTC)", name)
    return value


def query_text(request: Request, name: str, max_length: int = 200) -> str | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if len(raw) > max_length:
        raise invalid(f"{name} is longer than {max_length} characters", name)
    return raw
