"""The ``remote:`` section of ``signoff.yaml``: where the server is and this agent's token."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import field_validator

from signoff.policy.settings import (
    Duration,
    SettingsSection,
    check_http_url,
    expand_env,
    validated,
)


class RemoteSettings(SettingsSection):
    """A remote gate: the server's URL and this agent's token (``${SIGNOFF_TOKEN}``)."""

    url: str
    token: str
    poll_timeout: Duration = 25.0
    timeout: Duration = 30.0

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return check_http_url(value)


class _RemoteWrapper(SettingsSection):
    remote: RemoteSettings


def remote_settings(
    section: Mapping[str, Any], *, filename: str = "signoff.yaml"
) -> RemoteSettings:
    """Validate a ``remote:`` section (expanding ``${ENV_VAR}`` references)."""
    data = expand_env(dict(section), "remote")
    return validated(_RemoteWrapper, {"remote": data}, filename).remote


def check_sections(sections: Mapping[str, Mapping[str, Any]], *, filename: str) -> None:
    """The ``remote:`` checker of the section registry (:mod:`signoff.policy.sections`)."""
    if sections.get("remote"):
        remote_settings(sections["remote"], filename=filename)
