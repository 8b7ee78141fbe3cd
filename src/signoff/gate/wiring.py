"""What the gate needs from the parts above it, as small protocols and a registry.

The gate tells approvers about requests through *notifiers* (in-process channels) and a
*delivery worker* (the outbox of Slack, e-mail…), and ``Gate.from_config`` may answer with a
remote gate. All three are built from ``signoff.yaml`` by packages that sit above the gate
(``signoff.channels``, ``signoff.client``), so the gate never imports them: the composition
root (:mod:`signoff.assemble`, imported by ``signoff/__init__.py``) fills this registry, and
the gate only knows the protocols below.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from signoff.model import ApprovalRequest, SignoffError
from signoff.model.resolution import Transition
from signoff.store.base import Outbox, OutboxItem

if TYPE_CHECKING:
    from signoff.gate.core import Gate


class Notifier(Protocol):
    """An in-process channel: told when a request is created and when it resolves.

    Best effort; a failure is audited as ``notification_failed`` and never lets a tool run.
    """

    name: str

    async def notify(self, request: ApprovalRequest, gate: Gate) -> None: ...

    async def resolved(self, request: ApprovalRequest, gate: Gate) -> None: ...


class DeliveryWorker(Protocol):
    """The outbox side of notifications: rows planned with a request, sent by a worker."""

    @property
    def durable(self) -> bool:
        """Whether the store writes outbox rows in the request's own transaction."""
        ...

    @property
    def outbox(self) -> Outbox: ...

    def plan(self, request: ApprovalRequest) -> list[OutboxItem]: ...

    def in_commit(self, transition: Transition) -> list[OutboxItem]:
        """The rows ``transition`` announces that its own commit stores (pure, quick)."""
        ...

    def poke(self) -> None: ...

    async def on_change(self, transition: Transition) -> None: ...

    async def run(self) -> None: ...

    async def stop(self, task: asyncio.Future[None]) -> None: ...

    def base_url(self) -> str | None: ...


@dataclass(slots=True)
class BuiltChannels:
    """What the channel builder gives a gate: notifiers and, for messengers, a worker."""

    notifiers: list[Notifier]
    delivery: DeliveryWorker | None = None


ChannelBuilder = Callable[["Gate", Sequence[Any]], BuiltChannels]
RemoteFactory = Callable[..., Any]


class _Registry:
    channel_builder: ChannelBuilder | None = None
    remote_factory: RemoteFactory | None = None


_registry = _Registry()


def register_channel_builder(builder: ChannelBuilder) -> None:
    """Set how a gate turns its policy's ``channels:`` (plus explicit ones) into notifiers."""
    _registry.channel_builder = builder


def register_remote_factory(factory: RemoteFactory) -> None:
    """Set how ``Gate.from_config`` builds a remote gate from a ``remote:`` section."""
    _registry.remote_factory = factory


def build_channels(gate: Gate, explicit: Sequence[Any]) -> BuiltChannels:
    """The gate's channels, through the registered builder.

    Without one (the composition root was not imported), explicit notifiers are used as
    they are, and a policy that configures channels fails loudly rather than silently
    notifying nobody.
    """
    builder = _registry.channel_builder
    if builder is not None:
        return builder(gate, explicit)
    if gate.policy.sections.get("channels"):
        raise SignoffError("channels: are configured but signoff.assemble was not imported")
    return BuiltChannels(list(explicit))


def build_remote(section: Mapping[str, Any], **kwargs: Any) -> Any:
    factory = _registry.remote_factory
    if factory is None:
        raise SignoffError("remote: is configured but signoff.assemble was not imported")
    return factory(section, **kwargs)
