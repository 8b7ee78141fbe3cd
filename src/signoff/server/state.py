"""What every route needs, held once per app (no globals): the gate and the server's parts."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from starlette.requests import HTTPConnection
from starlette.templating import Jinja2Templates

from signoff.gate import Gate
from signoff.model import ApprovalRequest
from signoff.policy import Policy
from signoff.server.events import EventHub
from signoff.server.identity import Authenticator
from signoff.server.just_submitted import JustSubmitted
from signoff.server.metrics import Metrics
from signoff.server.records import ServerDB
from signoff.server.settings import ServerSettings


@dataclass(eq=False)
class ServerState:
    gate: Gate
    settings: ServerSettings
    db: ServerDB
    auth: Authenticator
    hub: EventHub
    metrics: Metrics
    templates: Jinja2Templates
    owns_gate: bool = False
    public_url: str | None = None
    secret: bytes = b""
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    # the waits of open long-polls, cancelled at shutdown so each answers at once
    long_polls: set[asyncio.Future[ApprovalRequest]] = field(default_factory=set)
    just_submitted: JustSubmitted = field(default_factory=JustSubmitted)

    @property
    def policy(self) -> Policy:
        return self.gate.policy

    def base_url(self, conn: HTTPConnection | None = None) -> str:
        """The URL put into links: ``serve.public_url``, else where the server listens."""
        if self.public_url:
            return self.public_url.rstrip("/")
        if conn is not None:
            return str(conn.base_url).rstrip("/")
        serve = self.settings.serve
        return f"http://{serve.host}:{serve.port}"


def state_of(conn: HTTPConnection) -> ServerState:
    state = conn.app.state.signoff
    assert isinstance(state, ServerState)
    return state
