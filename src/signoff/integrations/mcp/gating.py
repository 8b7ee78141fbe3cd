"""The ``mcp:`` section: optional gating of resource reads and prompt gets in the proxy.

```yaml
mcp:
  resources: {"file:///etc/*": deny, "secrets://*": require_approval}
  prompts:   {"admin__*": require_approval}
```

Keys are globs (``*``, ``?``, ``[…]``) over the URI or the prompt name as the client sees
it; an exact key wins, then the first matching glob in file order; nothing matching means
``allow``. ``require_approval`` sends the read through the gate as a call of the pseudo-tool
``mcp.resources/read`` with ``{"uri": …}`` (prompts: ``mcp.prompts/get`` with ``{"name",
"arguments"}``), so ``tools:`` rules, approvers, grants, the audit and the inbox treat it like
any other call. A ``deny`` here is an MCP error with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from pydantic import Field

from signoff.policy import Policy
from signoff.policy.settings import SettingsSection, expand_env, validated

Decision = Literal["allow", "deny", "require_approval"]
READ_TOOL = "mcp.resources/read"
PROMPT_TOOL = "mcp.prompts/get"


class McpSettings(SettingsSection):
    """``mcp:`` keys: a decision per resource URI glob and per prompt name glob."""

    resources: dict[str, Decision] = Field(default_factory=dict)
    prompts: dict[str, Decision] = Field(default_factory=dict)


class _Wrapper(SettingsSection):
    mcp: McpSettings = Field(default_factory=McpSettings)


def from_sections(
    sections: Mapping[str, Mapping[str, Any]], *, filename: str = "signoff.yaml"
) -> McpSettings:
    data = expand_env(dict(sections.get("mcp") or {}), "mcp")
    return validated(_Wrapper, {"mcp": data}, filename).mcp


def check_sections(sections: Mapping[str, Mapping[str, Any]], *, filename: str) -> None:
    """The ``mcp:`` checker of the section registry (:mod:`signoff.policy.sections`)."""
    from_sections(sections, filename=filename)


@dataclass(frozen=True, slots=True)
class Gating:
    """What the ``mcp:`` section decides for one URI or prompt name, and which key did."""

    settings: McpSettings

    @classmethod
    def from_policy(cls, policy: Policy) -> Gating:
        filename = policy.path.name if policy.path else "signoff.yaml"
        return cls(from_sections(policy.sections, filename=filename))

    def resource(self, uri: str) -> tuple[Decision, str | None]:
        return _decide(self.settings.resources, uri)

    def prompt(self, name: str) -> tuple[Decision, str | None]:
        return _decide(self.settings.prompts, name)


def _decide(table: Mapping[str, Decision], value: str) -> tuple[Decision, str | None]:
    if value in table:
        return table[value], value
    for pattern, decision in table.items():
        if fnmatchcase(value, pattern):
            return decision, pattern
    return "allow", None
