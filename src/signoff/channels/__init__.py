"""Telling approvers about requests, and taking their answers back — one module per channel.

Two kinds of channel, because they fail differently:

* A :class:`Channel` is called in-process when a request is created and when it resolves
  (the log, a terminal, a test double). Best effort: nothing is retried.
* A :class:`Messenger` talks to a provider (Slack, Discord, email, LINE, webhooks, Teams).
  Its messages go through the store's **outbox**: written with the request, sent by a
  worker at least once, retried with backoff, updated when the request resolves. A
  messenger that also takes decisions back implements :class:`Receiver`; the server mounts
  it at ``POST /hooks/<name>``.

Channels come from the ``channels:`` section of ``signoff.yaml``
(:func:`signoff.channels.registry.build_channels`) or are passed to
``Gate(channels=[...])``. Errors from a channel
never let a tool run and never crash the gate: they are audited as ``notification_failed``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from signoff.model import ApprovalRequest
from signoff.policy.notify import notify_names, wants

if TYPE_CHECKING:
    import httpx

    from signoff.channels.host import GateHandle
    from signoff.channels.redact import Redactor
    from signoff.policy.people import Person
    from signoff.store.base import OutboxKind


@runtime_checkable
class Channel(Protocol):
    """Tell approvers about a request, and update them when it resolves (in-process).

    ``notify`` raising is audited as ``notification_failed``; the request stays pending
    (the tool never runs because a channel failed — it just waits for another channel).
    """

    name: str

    async def notify(self, request: ApprovalRequest, gate: GateHandle) -> None: ...

    async def resolved(self, request: ApprovalRequest, gate: GateHandle) -> None: ...


@dataclass(frozen=True, slots=True)
class Target:
    """Where one message goes: one person's address on the channel (a Slack user id, an
    email address…), or a shared place (a channel, a webhook URL) when ``person`` is None.
    ``mentions`` are addresses to mention in a shared place."""

    address: str
    person: str | None = None
    mentions: tuple[str, ...] = ()


@dataclass(slots=True)
class Outgoing:
    """Everything a messenger needs to build one message.

    ``key`` is stable across retries (the outbox row id): the provider's idempotency key.
    ``page_url`` is the request's page in the web inbox (sign-in required) and
    ``review_link`` a personal one-click link — only for channels private to one person.
    ``event`` names what happened for event subscribers (``created``, ``decided``…).
    """

    kind: OutboxKind
    request: ApprovalRequest
    target: Target
    key: str
    redact: Redactor
    page_url: str | None = None
    review_link: str | None = None
    event: str | None = None
    attempt: int = 1
    data: dict[str, Any] = field(default_factory=dict)


class DeliveryError(Exception):
    """Sending failed. ``retryable`` errors (timeouts, 408/425/429/5xx) are tried again
    later — after ``retry_after`` seconds when the provider said so; others are final."""

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


@runtime_checkable
class Messenger(Protocol):
    """A provider channel whose messages go through the durable outbox.

    ``kinds`` says which outbox rows it takes (prompts, reminders, escalations, updates,
    events). ``personal_links`` is True only where a message reaches one person privately
    (email), so an approver-bound link may travel in it. ``ready`` returns None when the
    secrets it needs are in this process's environment, else why not — a process without
    them (the CLI) still queues messages; the server sends them.
    """

    name: str
    kinds: frozenset[str]
    personal_links: bool

    def ready(self) -> str | None: ...

    def targets(
        self, people: Sequence[Person], kind: OutboxKind, event: str | None = None
    ) -> list[Target]:
        """Where a message of ``kind`` about a request for these approvers goes."""
        ...

    async def send(self, message: Outgoing, http: httpx.AsyncClient) -> dict[str, Any] | None:
        """Send one message; return the provider's reference for a later update (or None).
        Raise :class:`DeliveryError`."""
        ...

    async def update(self, message: Outgoing, ref: dict[str, Any], http: httpx.AsyncClient) -> None:
        """Show the outcome on a message sent earlier (buttons removed), or post a follow-up
        where the provider cannot edit. Raise :class:`DeliveryError`."""
        ...


@dataclass(frozen=True, slots=True)
class Inbound:
    """A callback as it arrived: lower-case headers, the raw body (signatures are over the
    exact bytes), and the time it arrived (unix seconds)."""

    headers: Mapping[str, str]
    body: bytes
    now: float


@dataclass(slots=True)
class Reply:
    """The HTTP answer to a callback: a mapping or list is sent as JSON."""

    status: int = 200
    body: Any = None


@runtime_checkable
class Receiver(Protocol):
    """A channel that takes decisions back: verify the callback, identify the approver, decide.

    Anything not verified is refused (401) before it is parsed; nothing is decided twice
    (the gate's first-valid-decision-wins, plus the provider's event id within the window).
    """

    name: str

    async def receive(self, inbound: Inbound, gate: GateHandle) -> Reply: ...


class LogChannel:
    """Writes one line per request to the ``signoff.notify`` logger (development)."""

    name = "log"

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.log = logger or logging.getLogger("signoff.notify")

    async def notify(self, request: ApprovalRequest, gate: GateHandle) -> None:
        tools = ", ".join(a.name for a in request.action_requests)
        self.log.info(
            "approval needed: %s (%s) on thread %s — `signoff show %s`",
            request.id,
            tools,
            request.thread,
            request.id,
        )

    async def resolved(self, request: ApprovalRequest, gate: GateHandle) -> None:
        self.log.info("request %s %s", request.id, request.status)


__all__ = [
    "Channel",
    "DeliveryError",
    "Inbound",
    "LogChannel",
    "Messenger",
    "Outgoing",
    "Receiver",
    "Reply",
    "Target",
    "notify_names",
    "wants",
]
