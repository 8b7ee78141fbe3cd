"""The composition root: ``signoff.yaml`` → a :class:`~signoff.Gate` or a ``RemoteGate``.

The gate sits below the channels and the HTTP client, so it cannot build them itself. This
module, imported by ``signoff/__init__.py`` (and so before any use of a gate), teaches it
how: it registers the channel builder and the remote-gate factory with
:mod:`signoff.gate.wiring`, and runs every registered section checker for
``signoff policy check``.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from signoff.channels import Messenger
from signoff.channels.delivery import delivery_for
from signoff.channels.registry import build_channels
from signoff.gate import Gate
from signoff.gate.wiring import (
    BuiltChannels,
    Notifier,
    register_channel_builder,
    register_remote_factory,
)
from signoff.model import PolicyError
from signoff.policy import Policy
from signoff.policy.sections import SECTIONS

if TYPE_CHECKING:
    from signoff.client import RemoteGate


def channels_for(gate: Gate, explicit: Sequence[Any]) -> BuiltChannels:
    """The policy's ``channels:`` plus those passed to ``Gate(channels=...)`` (which win on a
    name clash): in-process channels are called directly, messengers go through the outbox."""
    names = {c.name for c in explicit}
    chosen = [c for c in build_channels(gate.policy) if c.name not in names] + list(explicit)
    messengers = [c for c in chosen if isinstance(c, Messenger)]
    notifiers: list[Notifier] = [c for c in chosen if not isinstance(c, Messenger)]
    delivery = delivery_for(gate, messengers) if messengers else None
    return BuiltChannels(notifiers, delivery)


def remote_gate(section: dict[str, Any], **kwargs: Any) -> RemoteGate:
    """A remote gate from a ``remote:`` section."""
    # Lazy: the HTTP client needs the optional extra signoff[client] (httpx).
    from signoff.client import RemoteGate

    return RemoteGate.from_section(section, **kwargs)


def check_sections(policy: Policy) -> tuple[list[str], list[str]]:
    """Run every registered section checker on the sections the policy has.

    Returns (errors, warnings); an unset ``${ENV_VAR}`` is a warning here (the secret may only
    exist where the server runs), a checker whose extra is not installed is a warning too.
    """
    filename = policy.path.name if policy.path else "signoff.yaml"
    errors: list[str] = []
    warnings: list[str] = []
    done: set[str] = set()
    for section in SECTIONS:
        if section.checker is None or section.checker in done:
            continue
        done.add(section.checker)
        present = [s.name for s in SECTIONS if s.checker == section.checker]
        module_name, _, function = section.checker.partition(":")
        try:
            # Lazy by design: owners sit above the policy layer, some behind an extra.
            check = getattr(importlib.import_module(module_name), function)
        except ImportError:
            if any(policy.sections.get(name) for name in present):
                warnings.append(
                    f"{'/'.join(present)} were not checked: install signoff[{section.extra}]"
                )
            continue
        try:
            check(policy.sections, filename=filename)
        except PolicyError as exc:
            unset_env = exc.message.startswith("environment variable ")
            (warnings if unset_env else errors).append(str(policy.located(exc)))
    return errors, warnings


register_channel_builder(channels_for)
register_remote_factory(remote_gate)

__all__ = ["channels_for", "check_sections", "remote_gate"]
