"""Running the app on uvicorn: in the foreground (``signoff serve``) or on a background
thread (tests, the demo, benchmarks), with graceful shutdown either way.

Uvicorn waits for open connections before it runs the app's shutdown, so our server
subclass first ends event streams and answers long-polls (:func:`signoff.server.app.stop`).
Link tokens travel in query strings; the access log gets them redacted.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import socket
import threading
import time
from typing import Any

import uvicorn
from starlette.applications import Starlette

from signoff.server.app import stop
from signoff.server.http_protocol import head_limited
from signoff.server.state import ServerState

_TOKEN_IN_QUERY = re.compile(r"([?&]t=)[^&\s]+")


class RedactLinkTokens(logging.Filter):
    """Keeps one-click link tokens out of access logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and len(record.args) >= 3:
            args = list(record.args)
            args[2] = _TOKEN_IN_QUERY.sub(r"\1[redacted]", str(args[2]))
            record.args = tuple(args)
        return True


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, app: Starlette) -> None:
        super().__init__(config)
        self._signoff_app = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        stop(self._signoff_app)
        await super().shutdown(sockets)


def _config(
    app: Starlette, host: str, port: int, *, access_log: bool, log_level: str
) -> uvicorn.Config:
    limits = app.state.signoff.settings.serve  # serve.* limits (docs/server.md, "Limits")
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        access_log=access_log,
        log_level=log_level,
        proxy_headers=False,  # the trusted-proxy check needs the real peer address
        server_header=False,
        timeout_graceful_shutdown=10,
        lifespan="on",
        # httptools (C) with our bound on a head still arriving; h11's own bound is set too,
        # for anyone who runs the app on uvicorn's h11 protocol
        http=head_limited(limits.max_header_bytes),
        h11_max_incomplete_event_size=limits.max_header_bytes,
        timeout_keep_alive=max(1, math.ceil(limits.keep_alive_timeout)),
        limit_concurrency=limits.max_connections,
    )


def _install_log_filter() -> None:
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactLinkTokens) for f in access.filters):
        access.addFilter(RedactLinkTokens())


def serve(app: Starlette, host: str, port: int, *, access_log: bool = True) -> None:
    """Serve in the foreground until SIGINT/SIGTERM."""
    server = _Server(_config(app, host, port, access_log=access_log, log_level="info"), app)
    _install_log_filter()
    server.run()


class ServerThread:
    """The app on 127.0.0.1 (port 0 picks a free port) in a daemon thread."""

    def __init__(
        self,
        app: Starlette,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        access_log: bool = False,
        log_level: str = "warning",
    ) -> None:
        self.app = app
        self.server = _Server(
            _config(app, host, port, access_log=access_log, log_level=log_level), app
        )
        self._thread: threading.Thread | None = None
        self.url = ""

    def start(self, timeout: float = 30.0) -> str:
        _install_log_filter()
        self._thread = threading.Thread(target=self._run, name="signoff-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        pause = threading.Event()
        while not self.server.started and self._thread.is_alive() and time.monotonic() < deadline:
            pause.wait(0.01)  # start-up only: uvicorn has no "started" callback
        if not self.server.started:
            raise RuntimeError("the signoff server did not start (see the log above)")
        sock = self.server.servers[0].sockets[0]
        host, port = sock.getsockname()[:2]
        self.url = f"http://{host}:{port}"
        state: ServerState = self.app.state.signoff
        if state.public_url is None:
            state.public_url = self.url
        return self.url

    def _run(self) -> None:
        asyncio.run(self.server.serve())

    def stop(self, timeout: float = 15.0) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> ServerThread:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
