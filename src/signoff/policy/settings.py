"""Building blocks for the non-policy sections of ``signoff.yaml`` (serve, remote, channels…).

Each owning package validates its section with pydantic models built from these parts, so a
mistake anywhere reads the same: a :class:`PolicyError` naming the key (``serve.port``), and
secrets given only as ``${ENV_VAR}`` references, expanded at the last moment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, ValidationError

from signoff.model import PolicyError
from signoff.policy.durations import parse_duration

M = TypeVar("M", bound=BaseModel)
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _duration(value: object) -> float:
    try:
        return parse_duration(value)
    except PolicyError as exc:
        raise ValueError(exc.message) from None  # pydantic adds where it happened


def check_http_url(value: str) -> str:
    """An http(s) URL without its trailing slash; ValueError otherwise."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"expected an http:// or https:// URL, got {value!r}")
    return value.rstrip("/")


Duration = Annotated[float, BeforeValidator(_duration)]
HttpUrl = Annotated[str, AfterValidator(check_http_url)]


class SettingsSection(BaseModel):
    """Base of every settings model: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def expand_env(value: Any, path: str) -> Any:
    """Replace ``${NAME}`` in every string with the environment variable's value."""
    if isinstance(value, str):

        def repl(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in os.environ:
                raise PolicyError(
                    f"environment variable {name} is not set (referenced as ${{{name}}})",
                    path=path,
                )
            return os.environ[name]

        return _ENV_REF.sub(repl, value)
    if isinstance(value, Mapping):
        return {k: expand_env(v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [expand_env(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


def validated(model: type[M], data: dict[str, Any], filename: str) -> M:
    """``model`` from ``data``; the first mistake as a PolicyError with the key's path."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        raise PolicyError(message, path=f"{filename}.{where}", file=filename) from None
    except PolicyError as exc:
        raise PolicyError(exc.message, path=f"{filename}.{exc.path}", file=filename) from None
