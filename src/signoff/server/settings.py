"""The ``serve:``, ``auth:``, ``ui:`` and ``remote:`` sections of ``signoff.yaml``.

The policy loader keeps these sections as raw mappings (``Policy.sections``); this module
validates them with pydantic and turns every mistake into a :class:`PolicyError` that names
the key (``serve.port``), so a bad server config fails at start-up, never mid-request.
Secrets are written as ``${ENV_VAR}`` references and expanded here, never stored inline.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from signoff.channels.redact import DEFAULT_REDACT_KEYS  # one list for inbox and chat
from signoff.model import PolicyError
from signoff.policy.durations import parse_duration

M = TypeVar("M", bound=BaseModel)
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _duration(value: object) -> float:
    try:
        return parse_duration(value)
    except PolicyError as exc:
        raise ValueError(exc.message) from None  # pydantic adds where it happened


Duration = Annotated[float, BeforeValidator(_duration)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServeSettings(_Section):
    """Where ``signoff serve`` listens, and the public URL put into links."""

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    public_url: str | None = None
    long_poll_max: Duration = 60.0
    access_log: bool = True

    @field_validator("public_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return None if value is None else _check_http_url(value)


class TrustedProxy(_Section):
    """An SSO proxy in front of the server that asserts who the user is in a header."""

    addresses: list[str]
    user_header: str = "X-Forwarded-User"
    email_header: str = "X-Forwarded-Email"

    @field_validator("addresses")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("list the proxy addresses (IPs or CIDRs) whose headers are trusted")
        for item in value:
            ipaddress.ip_network(item, strict=False)
        return value

    def trusts(self, peer: str | None) -> bool:
        if not peer:
            return False
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(address in ipaddress.ip_network(n, strict=False) for n in self.addresses)


class AuthSettings(_Section):
    """Who may manage, how long browser sessions and login links live, the SSO proxy."""

    admin_roles: list[str] = Field(default_factory=list)
    session_ttl: Duration = 12 * 3600.0
    login_link_ttl: Duration = 15 * 60.0
    trusted_proxy: TrustedProxy | None = None


class UISettings(_Section):
    """The web inbox: its title and which argument names are redacted."""

    title: str = "signoff"
    redact_keys: list[str] = Field(default_factory=lambda: list(DEFAULT_REDACT_KEYS))

    @field_validator("redact_keys")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            re.compile(pattern)
        return value

    def redactor(self) -> re.Pattern[str] | None:
        if not self.redact_keys:
            return None
        return re.compile("|".join(f"(?:{p})" for p in self.redact_keys), re.IGNORECASE)


class RemoteSettings(_Section):
    """A remote gate: the server's URL and this agent's token (``${SIGNOFF_TOKEN}``)."""

    url: str
    token: str
    poll_timeout: Duration = 25.0
    timeout: Duration = 30.0

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return _check_http_url(value)


class ServerSettings(_Section):
    """Everything the server reads from the config besides the policy itself."""

    serve: ServeSettings = Field(default_factory=ServeSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    ui: UISettings = Field(default_factory=UISettings)

    @classmethod
    def from_sections(
        cls, sections: Mapping[str, Mapping[str, Any]], *, filename: str = "signoff.yaml"
    ) -> ServerSettings:
        data = {k: expand_env(dict(sections.get(k) or {}), k) for k in ("serve", "auth", "ui")}
        return _validated(cls, data, filename)


def remote_settings(
    section: Mapping[str, Any], *, filename: str = "signoff.yaml"
) -> RemoteSettings:
    """Validate a ``remote:`` section (expanding ``${ENV_VAR}`` references)."""
    data = expand_env(dict(section), "remote")
    wrapped = _validated(_RemoteWrapper, {"remote": data}, filename)
    return wrapped.remote


class _RemoteWrapper(_Section):
    remote: RemoteSettings


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


def _validated(model: type[M], data: dict[str, Any], filename: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        raise PolicyError(message, path=f"{filename}.{where}", file=filename) from None
    except PolicyError as exc:
        raise PolicyError(exc.message, path=f"{filename}.{exc.path}", file=filename) from None


def _check_http_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"expected an http:// or https:// URL, got {value!r}")
    return value.rstrip("/")
