"""The ``gate:`` section of ``signoff.yaml``: runtime settings of the gate (not policy).

``defaults:`` holds review fields that tools and rules inherit; how the gate itself runs
(how often the sweeper looks, and, in later versions, limits on waiting and re-attaching)
lives here, so the two never mix.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cached_property
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, Field

from signoff.checks.shell import AllowList, parse_entry
from signoff.model import PolicyError
from signoff.policy import Policy
from signoff.policy.settings import Duration, SettingsSection, expand_env, validated

NON_INTERACTIVE_ENV: Final = "SIGNOFF_NON_INTERACTIVE"
_ON: Final = ("1", "true", "yes", "on")
_OFF: Final = ("0", "false", "no", "off")


def _allow_entry(value: str) -> str:
    parse_entry(value)
    return value


class NonInteractiveSettings(SettingsSection):
    """``gate.non_interactive``: what happens to calls that need a human when nobody can
    answer (see :func:`interactive_mode` for when that is)."""

    #: ``true`` makes runs with this file non-interactive unless ``SIGNOFF_NON_INTERACTIVE``
    #: or the caller says otherwise.
    enabled: bool = False
    #: Tools whose ``command_arg`` is a shell command, checked against ``allow_list``
    #: (deepagents' names for its shell tool).
    shell_tools: tuple[str, ...] = ("execute", "shell", "bash")
    #: Shell commands approved at once when every segment starts with one of these.
    allow_list: tuple[Annotated[str, AfterValidator(_allow_entry)], ...] = ()
    #: What the other calls needing approval get: ``reject`` (signoff's default) or
    #: ``approve`` (what deepagents' CLI does).
    non_shell: Literal["reject", "approve"] = "reject"
    #: The argument of a shell tool that holds the command.
    command_arg: str = Field(default="command", min_length=1)

    @cached_property
    def commands(self) -> AllowList:
        return AllowList(self.allow_list)


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
    #: What non-interactive runs do with calls that need a human.
    non_interactive: NonInteractiveSettings = Field(default_factory=NonInteractiveSettings)

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


def interactive_mode(explicit: bool | None, settings: GateSettings) -> bool:
    """Whether a human can be asked: the one precedence rule, nearest to the run first.

    1. ``explicit`` — ``Gate(interactive=...)``, or a command's ``--non-interactive`` flag;
    2. ``SIGNOFF_NON_INTERACTIVE`` — ``1/true/yes/on`` or ``0/false/no/off`` (unset or empty:
       no say; anything else is an error);
    3. ``gate.non_interactive.enabled`` in the policy file;
    4. otherwise interactive.
    """
    if explicit is not None:
        return explicit
    env = env_non_interactive()
    if env is not None:
        return not env
    return not settings.non_interactive.enabled


def env_non_interactive() -> bool | None:
    """``SIGNOFF_NON_INTERACTIVE`` as on, off, or None when unset or empty."""
    raw = os.environ.get(NON_INTERACTIVE_ENV, "").strip().lower()
    if not raw:
        return None
    if raw in _ON:
        return True
    if raw in _OFF:
        return False
    raise PolicyError(
        f"{NON_INTERACTIVE_ENV}={raw!r} is not understood; use one of "
        f"{', '.join(_ON)} (non-interactive) or {', '.join(_OFF)} (interactive)",
        path=NON_INTERACTIVE_ENV,
    )
