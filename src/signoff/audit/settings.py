"""The ``audit:`` section of ``signoff.yaml``: the key that signs checkpoints, and their sink.

```yaml
audit:
  key: ${SIGNOFF_AUDIT_KEY}        # HMAC-SHA256 key: a ${ENV_VAR} reference, never inline
  anchor: file:///var/lib/signoff-anchors/anchors.jsonl   # or https://anchors.example.com/…
  anchor_every: 100                # events
  anchor_interval: 10s             # when anything changed
  signer: replica-a                # default: hostname:pid
```

``anchor`` must be outside the database (a file on another volume or machine, or a receiver
the database's operators cannot rewrite); checkpoints are only as trustworthy as that place.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple
from urllib.parse import unquote, urlsplit

from pydantic import Field, field_validator, model_validator

from signoff.model import PolicyError
from signoff.policy import Policy
from signoff.policy.settings import Duration, SettingsSection, expand_env, validated

MIN_KEY_CHARS = 16
_ONE_ENV_REF = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_LOOPBACK_NAMES = ("localhost",)


class AnchorTarget(NamedTuple):
    """Where checkpoints go: a file path (``file``) or a URL to POST to (``http``)."""

    kind: Literal["file", "http"]
    where: str


class AuditSettings(SettingsSection):
    """``audit:`` keys, with their defaults."""

    key: str | None = None
    anchor: str | None = None
    anchor_every: int = Field(default=100, ge=1)
    anchor_interval: Duration = Field(default=10.0, gt=0)
    signer: str | None = Field(default=None, min_length=1, max_length=200)

    @field_validator("key")
    @classmethod
    def _long_enough(cls, value: str | None) -> str | None:
        if value is not None and len(value) < MIN_KEY_CHARS:
            raise ValueError(
                f"the audit key must be at least {MIN_KEY_CHARS} characters "
                "(generate one with `openssl rand -hex 32`)"
            )
        return value

    @field_validator("anchor")
    @classmethod
    def _sink_url(cls, value: str | None) -> str | None:
        if value is not None:
            parse_anchor(value)
        return value

    @model_validator(mode="after")
    def _signed(self) -> AuditSettings:
        if self.anchor is not None and self.key is None:
            raise ValueError(
                "audit.anchor needs audit.key: checkpoints are signed (key: ${SIGNOFF_AUDIT_KEY})"
            )
        return self

    @classmethod
    def from_policy(cls, policy: Policy) -> AuditSettings:
        filename = policy.path.name if policy.path else "signoff.yaml"
        return from_sections(policy.sections, filename=filename)

    @property
    def key_bytes(self) -> bytes | None:
        return self.key.encode("utf-8") if self.key is not None else None

    def signer_name(self) -> str:
        """The configured signer, or ``hostname:pid`` (each replica names itself)."""
        return self.signer or f"{socket.gethostname()}:{os.getpid()}"

    def target(self, base_dir: Path | None = None) -> AnchorTarget | None:
        """Where checkpoints go; a relative ``file:`` path is taken from ``base_dir``."""
        if self.anchor is None:
            return None
        target = parse_anchor(self.anchor)
        if target.kind == "file" and not os.path.isabs(target.where):
            return AnchorTarget("file", str((base_dir or Path.cwd()) / target.where))
        return target


def parse_anchor(value: str) -> AnchorTarget:
    """``file:///abs/anchors.jsonl``, ``file:relative.jsonl``, ``https://…`` (``http://`` only
    to a loopback address); ValueError otherwise."""
    parts = urlsplit(value)
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValueError(
                f"file anchor {value!r} names a host; write file:///absolute/path.jsonl "
                "or file:relative/path.jsonl"
            )
        path = unquote(parts.path)
        if not path or path.endswith("/"):
            raise ValueError(f"file anchor {value!r} needs a file name")
        return AnchorTarget("file", path)
    if scheme == "https" and parts.hostname:
        return AnchorTarget("http", value)
    if scheme == "http" and parts.hostname and _loopback(parts.hostname):
        return AnchorTarget("http", value)
    raise ValueError(
        f"expected file:///path/anchors.jsonl or an https:// URL (http:// only to a loopback "
        f"address), got {value!r}"
    )


def _loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def from_sections(
    sections: Mapping[str, Mapping[str, Any]], *, filename: str = "signoff.yaml"
) -> AuditSettings:
    raw = sections.get("audit") or {}
    _by_reference(raw, filename)
    data = expand_env(dict(raw), "audit")
    return validated(_Wrapper, {"audit": data}, filename).audit


def _by_reference(section: Mapping[str, Any], filename: str) -> None:
    """The key is written ``${ENV_VAR}``, never inline (it would sit in every copy of the
    config, next to the database it protects)."""
    value = section.get("key") if isinstance(section, Mapping) else None
    if value is not None and not (isinstance(value, str) and _ONE_ENV_REF.fullmatch(value)):
        raise PolicyError(
            "the audit key is written as a ${ENV_VAR} reference, never inline: "
            "e.g. key: ${SIGNOFF_AUDIT_KEY}",
            path=f"{filename}.audit.key",
            file=filename,
        )


class _Wrapper(SettingsSection):
    audit: AuditSettings = Field(default_factory=AuditSettings)


def check_sections(sections: Mapping[str, Mapping[str, Any]], *, filename: str) -> None:
    """The ``audit:`` checker of the section registry (:mod:`signoff.policy.sections`)."""
    from_sections(sections, filename=filename)
