"""The ``serve:``, ``auth:`` and ``ui:`` sections of ``signoff.yaml`` (``remote:`` is the
client's: :mod:`signoff.client.settings`).

The policy loader keeps these sections as raw mappings (``Policy.sections``); this module
validates them with pydantic and turns every mistake into a :class:`PolicyError` that names
the key (``serve.port``), so a bad server config fails at start-up, never mid-request.
Secrets are written as ``${ENV_VAR}`` references and expanded here, never stored inline.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator

from signoff.model import PolicyError
from signoff.policy.redact import DEFAULT_REDACT_KEYS
from signoff.policy.regex import Regex, RegexError, compile_any, compile_regex
from signoff.policy.settings import (
    Duration,
    SettingsSection,
    check_http_url,
    expand_env,
    validated,
)

_Section = SettingsSection
_ONE_ENV_REF = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")


class ServeSettings(_Section):
    """Where ``signoff serve`` listens, the public URL put into links, and the limits that
    keep slow or greedy clients from tying the server up (docs/server.md, "Limits")."""

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    public_url: str | None = None
    long_poll_max: Duration = 60.0
    access_log: bool = True
    body_timeout: Duration = 10.0
    keep_alive_timeout: Duration = 5.0
    max_connections: int = Field(default=1000, ge=1)
    max_header_bytes: int = Field(default=32 * 1024, ge=1024, le=1024 * 1024)
    metrics_token: str | None = Field(default=None, min_length=16)

    @field_validator("public_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return None if value is None else check_http_url(value)


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
    """The web inbox: its title. ``redact_keys`` is the older name of the top-level
    ``redact_keys`` (the one list every surface uses: ``Policy.secret_keys``), still
    accepted and checked here."""

    title: str = "signoff"
    redact_keys: list[str] = Field(default_factory=lambda: list(DEFAULT_REDACT_KEYS))

    @field_validator("redact_keys")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for i, pattern in enumerate(value):
            try:
                compile_regex(pattern, ignore_case=True)
            except RegexError as exc:
                raise ValueError(f"[{i}] {exc}") from None
        return value

    def redactor(self) -> Regex | None:
        """These keys as one case-insensitive RE2 pattern. The server itself uses the
        policy's ``secret_keys`` (top-level ``redact_keys``, or this list under its old
        name)."""
        if not self.redact_keys:
            return None
        return compile_any(self.redact_keys, ignore_case=True)


class ServerSettings(_Section):
    """Everything the server reads from the config besides the policy itself."""

    serve: ServeSettings = Field(default_factory=ServeSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    ui: UISettings = Field(default_factory=UISettings)

    @classmethod
    def from_sections(
        cls, sections: Mapping[str, Mapping[str, Any]], *, filename: str = "signoff.yaml"
    ) -> ServerSettings:
        _by_reference(sections.get("serve") or {}, "metrics_token", filename)
        data = {k: expand_env(dict(sections.get(k) or {}), k) for k in ("serve", "auth", "ui")}
        return validated(cls, data, filename)


def _by_reference(section: Mapping[str, Any], key: str, filename: str) -> None:
    """A secret such as ``serve.metrics_token`` is written ``${ENV_VAR}``, never inline."""
    value = section.get(key) if isinstance(section, Mapping) else None
    if value is not None and not (isinstance(value, str) and _ONE_ENV_REF.fullmatch(value)):
        raise PolicyError(
            "secrets are written as a ${ENV_VAR} reference, never inline: "
            f"e.g. {key}: ${{SIGNOFF_METRICS_TOKEN}}",
            path=f"{filename}.serve.{key}",
            file=filename,
        )


def check_sections(sections: Mapping[str, Mapping[str, Any]], *, filename: str) -> None:
    """The ``serve:``/``auth:``/``ui:`` checker of the section registry."""
    ServerSettings.from_sections(sections, filename=filename)
