"""One upstream MCP server as the proxy reaches it: connected, watched, restarted.

A link owns one :class:`mcp.Client` inside a task of its own (an anyio context must be left
in the task that entered it), so it can drop a dead connection and open a new one while the
proxy keeps serving. The first connection must succeed within ``connect_timeout`` or the
link fails with one :class:`UpstreamError` naming the upstream. Later losses — a process
that died, a connection that closed — are noticed on use (``CONNECTION_CLOSED`` from any
request, or a failed ping) and answered by restarting with exponential backoff, a bounded
number of times, each attempt logged. A restarted connection is handed to ``on_restart``
(which renews what the old session held, such as resource subscriptions) before it is
published as :attr:`UpstreamLink.client`, so no request uses it half-restored.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.session import (
    ElicitationFnT,
    ListRootsFnT,
    LoggingFnT,
    MessageHandlerFnT,
    SamplingFnT,
)
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ServerEvent
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from signoff.integrations.mcp.lean import LeanHTTP
from signoff.integrations.mcp.upstreams import UpstreamError, UpstreamSpec, without_query

log = logging.getLogger("signoff.mcp")

#: How long the handshake with an upstream may take (``--upstream-connect-timeout``).
DEFAULT_CONNECT_TIMEOUT = 30.0
#: Restart delays double from ``first`` up to ``cap``; after ``attempts`` failures in a row
#: the upstream stays down (calls get an error result) until the proxy is restarted.
BACKOFF_FIRST, BACKOFF_CAP, BACKOFF_ATTEMPTS = 0.5, 30.0, 8
PING_TIMEOUT = 5.0
#: The largest single message (a tool result) relayed from an HTTP upstream; the SDK's
#: default SSE event limit (1 MiB) would fail larger results inside the proxy.
MAX_RESULT_BYTES = 16 * 1024 * 1024


@dataclass(slots=True)
class ClientHooks:
    """What an upstream may ask of the real client, and where its notifications go.

    A callback left ``None`` is not declared to the upstream: the proxy declares to
    upstreams exactly what its own client declared.
    """

    sampling: SamplingFnT | None = None
    sampling_capabilities: types.SamplingCapability | None = None
    elicitation: ElicitationFnT | None = None
    roots: ListRootsFnT | None = None
    logging: LoggingFnT | None = None
    messages: MessageHandlerFnT | None = None
    #: Change events from a 2026-07-28 upstream (read from a listen stream the link opens).
    events: Callable[[ServerEvent], Awaitable[None]] | None = None
    client_info: types.Implementation | None = None


@dataclass(slots=True)
class LinkState:
    """Why a link is down, for the error texts (empty while up)."""

    reason: str = ""
    restarts: int = 0
    gave_up: bool = False
    changed: anyio.Event = field(default_factory=anyio.Event)


class UpstreamLink:
    """A restartable connection to one upstream; ``client`` is None while it is down."""

    def __init__(
        self,
        spec: UpstreamSpec,
        *,
        hooks: ClientHooks,
        mode: str = "auto",
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        restarts: int = BACKOFF_ATTEMPTS,
        on_restart: Callable[[UpstreamLink, Client], Awaitable[None]] | None = None,
    ) -> None:
        self.spec = spec
        self.hooks = hooks
        self.mode = mode
        self.connect_timeout = connect_timeout
        self.max_restarts = restarts
        self.on_restart = on_restart
        self.client: Client | None = None
        #: The direct ``tools/call`` leg of an HTTP upstream (None: stdio or in-process).
        self.lean: LeanHTTP | None = None
        self.state = LinkState()
        self._lost = anyio.Event()
        self._closing = False

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def up(self) -> bool:
        return self.client is not None

    @property
    def modern(self) -> bool:
        """Whether the upstream speaks 2026-07-28 (or later)."""
        client = self.client
        return client is not None and client.protocol_version in MODERN_PROTOCOL_VERSIONS

    @property
    def capabilities(self) -> types.ServerCapabilities:
        return self.client.server_capabilities if self.client else types.ServerCapabilities()

    def lost(self, reason: str) -> None:
        """Mark the connection dead (a request saw it closed); the run task restarts it."""
        if self.client is None:
            return
        log.warning("upstream %s is gone (%s); restarting it", self.spec.label, reason)
        self.client = None
        self.state.reason = reason
        self._signal()
        self._lost.set()

    async def alive(self) -> bool:
        """Ping the upstream (2025 era) — False, and restart, when the connection is dead."""
        client = self.client
        if client is None:
            return False
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return True  # no ping at 2026-07-28; a dead peer shows on the next request
        try:
            with anyio.fail_after(PING_TIMEOUT):
                await client.session.send_ping()
        except MCPError as exc:
            if exc.error.code == types.CONNECTION_CLOSED:
                self.lost("connection closed")
                return False
            return True
        except TimeoutError:
            return True  # busy is not dead
        except Exception as exc:
            self.lost(_describe(exc))
            return False
        return True

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Connect (``task_status.started()`` once up, or raise UpstreamError), then keep
        the connection, restarting it whenever it is lost, until cancelled."""
        await self._session(first=True, task_status=task_status)
        delay = BACKOFF_FIRST
        while not self._closing:
            if self.state.restarts >= self.max_restarts:
                self.state.gave_up = True
                self._signal()
                log.error(
                    "upstream %s could not be restarted after %d attempts; calls to it fail "
                    "until the proxy restarts",
                    self.spec.label,
                    self.state.restarts,
                )
                await anyio.sleep_forever()
            log.info("restarting upstream %s in %.1f s", self.spec.label, delay)
            await anyio.sleep(delay)
            self.state.restarts += 1
            try:
                await self._session(first=False)
                delay = BACKOFF_FIRST
            except UpstreamError as exc:
                log.warning("%s", exc)
                delay = min(delay * 2, BACKOFF_CAP)

    async def _session(self, *, first: bool, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """One connection's life: open it, publish it, wait until it is lost."""
        self._lost = anyio.Event()
        connected = False
        deadline = anyio.current_time() + self.connect_timeout
        with anyio.CancelScope(deadline=deadline) as handshake:
            try:
                async with self._client() as client, anyio.create_task_group() as tg:
                    events = self.hooks.events
                    if events is not None and client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                        await tg.start(self._listen, client, events)  # before any call is relayed
                    connected = True
                    handshake.deadline = math.inf
                    try:
                        if not first and self.on_restart is not None:
                            await self.on_restart(self, client)  # before anyone uses it
                        self.client = client
                        self.state.reason = ""
                        self._signal()
                        if first:
                            task_status.started()
                        await self._lost.wait()
                    finally:
                        self.client = None
                        tg.cancel_scope.cancel()
            except Exception as exc:
                if not connected:
                    raise UpstreamError(
                        f"upstream {self.spec.label} could not be started or reached "
                        f"({self.spec.describe()}): {_describe(exc)}"
                    ) from None
                log.debug("closing upstream %s raised %s", self.spec.label, _describe(exc))
        if handshake.cancelled_caught and not connected:
            raise UpstreamError(
                f"upstream {self.spec.label} did not complete the MCP handshake within "
                f"{self.connect_timeout:g} s ({self.spec.describe()}); check the server or "
                "raise --upstream-connect-timeout"
            )

    async def _listen(
        self,
        client: Client,
        deliver: Callable[[ServerEvent], Awaitable[None]],
        *,
        task_status: Any = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Relay a 2026-07-28 upstream's change events (they travel only on a listen
        stream); started once the upstream acknowledged it. An upstream that does not serve
        ``subscriptions/listen`` just sends none."""
        started = False
        try:
            async with client.listen(
                tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True
            ) as events:
                task_status.started()
                started = True
                async for event in events:
                    await deliver(event)
        except Exception as exc:
            log.debug("no change events from upstream %s: %s", self.spec.label, _describe(exc))
        if not started:
            task_status.started()

    async def aclose(self) -> None:
        self._closing = True
        self._lost.set()

    def _client(self) -> Client:
        hooks = self.hooks
        target = self.spec.target
        if isinstance(target, str):  # streamable HTTP, with room for large results
            quiet_http_log()
            self.lean = LeanHTTP(target, max_event_size=MAX_RESULT_BYTES)
            target = self.lean.connect()
        return Client(
            target,
            mode=self.mode,
            cache=None,  # the proxy keeps its own listing cache (invalidated by list_changed)
            sampling_callback=hooks.sampling,
            sampling_capabilities=hooks.sampling_capabilities,
            elicitation_callback=hooks.elicitation,
            list_roots_callback=hooks.roots,
            logging_callback=hooks.logging,
            message_handler=hooks.messages,
            client_info=hooks.client_info,
        )

    def _signal(self) -> None:
        self.state.changed.set()
        self.state.changed = anyio.Event()


def _describe(exc: BaseException) -> str:
    """The innermost cause, in one line (never "unhandled errors in a TaskGroup")."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError) and exc.error.code == types.CONNECTION_CLOSED:
        return "it exited or closed the connection before answering"
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def is_connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the upstream connection is gone (not a tool's own error)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return exc.error.code == types.CONNECTION_CLOSED
    return isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError | OSError)


describe = _describe


class _QuietHTTPLog(logging.Filter):
    """httpx2 logs every request at INFO with its full URL (query strings may carry
    tokens): keep those lines out of INFO, and at DEBUG without the query."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or not str(record.msg).startswith("HTTP Request"):
            return True
        if log.isEnabledFor(logging.DEBUG) and isinstance(record.args, tuple):
            method, url, *rest = record.args
            log.debug("upstream HTTP %s %s %s", method, without_query(str(url)), rest[1:2])
        return False


_HTTP_FILTER = _QuietHTTPLog()


def quiet_http_log() -> None:
    """Install the filter on httpx2's logger (once)."""
    logger = logging.getLogger("httpx2")
    if _HTTP_FILTER not in logger.filters:
        logger.addFilter(_HTTP_FILTER)
