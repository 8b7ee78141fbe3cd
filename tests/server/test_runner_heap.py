"""``signoff serve`` freezes the start-up heap (gc.freeze) once the app has started, so the
collector's full passes skip what lives as long as the process; a server on a background
thread leaves its host process's collector alone."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Iterator

import httpx
import pytest

from signoff import Gate, Policy
from signoff.server import ServerThread, create_app
from signoff.server.runner import _config, _Server
from signoff.store import MemoryStore
from tests.server.conftest import POLICY


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the test process's heap goes back to the collector


def test_the_foreground_server_freezes_the_heap_once_started(unfrozen: None) -> None:
    app = create_app(Gate(Policy.from_yaml(POLICY), store=MemoryStore()), owns_gate=True)
    config = _config(app, "127.0.0.1", 0, access_log=False, log_level="warning")
    server = _Server(config, app, freeze_heap=True)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    try:
        pause = threading.Event()
        while not server.started and thread.is_alive():
            pause.wait(0.01)  # start-up only: uvicorn has no "started" callback
        assert server.started
        port = server.servers[0].sockets[0].getsockname()[1]
        # answered on the loop, so the start-up step that set `started` (and froze) is over
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
        assert gc.get_freeze_count() > 0
    finally:
        server.should_exit = True
        thread.join(15)


def test_a_server_on_a_background_thread_does_not_freeze_its_host(unfrozen: None) -> None:
    app = create_app(Gate(Policy.from_yaml(POLICY), store=MemoryStore()), owns_gate=True)
    with ServerThread(app) as running:
        assert httpx.get(f"{running.url}/healthz").status_code == 200
        assert gc.get_freeze_count() == 0
