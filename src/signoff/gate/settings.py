"""The ``gate:`` section of ``signoff.yaml``: runtime settings of the gate (not policy).

``defaults:`` holds review fields that tools and rules inherit; how the gate itself runs
(how often the sweeper looks, and, in later versions, limits on waiting and re-attaching)
lives here, so the two never mix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from signoff.policy import Policy
from signoff.policy.settings import Duration, SettingsSection, expand_env, validated


class GateSettings(SettingsSection):
    """``gate:`` keys, with their defaults."""

    sweep_interval: Duration = Field(default=1.0, gt=0)
    #: A restarted agent asking exactly what it asked before (same agent, principal, thread,
    #: tool and arguments) re-attaches to the open request once its old waiter's lease lapsed.
    reattach: bool = True
    #: How long a waiter's lease lasts without renewal (renewed every third of it).
    lease: Duration = Field(default=60.0, gt=0)
    #: How long an ``executing`` claim is presumed alive; older ones show as interrupted and
    #: may be reconciled by a human.
    execution_timeout: Duration = Field(default=900.0, gt=0)
    #: Refuse calls whose principal is not in ``people:`` (rule ``unknown_principal``).
    strict_principals: bool = False

    @classmethod
    def from_policy(cls, policy: Policy) -> GateSettings:
        filename = policy.path.name if policy.path else "signoff.yaml"
        return from_sections(policy.sections, filename=filename)


def from_sections(
    sections: Mapping[str, Mapping[str, Any]], *, filename: str = "signoff.yaml"
) -> GateSettings:
    data = expand_env(dict(sections.get("gate") or {}), "gate")
    return validated(_Wrapper, {"gate": data}, filename).gate


class _Wrapper(SettingsSection):
    gate: GateSettings = Field(default_factory=GateSettings)


def check_sections(sections: Mapping[str, Mapping[str, Any]], *, filename: str) -> None:
    """The ``gate:`` checker of the section registry (:mod:`signoff.policy.sections`)."""
    from_sections(sections, filename=filename)
