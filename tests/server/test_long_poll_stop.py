"""A parked long-poll is one task the server's shutdown cancels: it answers at once with the
request's current state, and the gauge of parked long-polls comes back to zero however a
wait ends."""

from __future__ import annotations

import threading

import httpx

from signoff.server.state import ServerState
from tests.server.conftest import Server
from tests.server.test_hygiene import connect, head


def _until_parked(state: ServerState, n: int) -> None:
    pause = threading.Event()
    while state.metrics.long_polls < n:  # the gauge moves when the wait is registered
        pause.wait(0.01)


def test_shutdown_answers_a_parked_long_poll_with_the_current_state(server: Server) -> None:
    rid = server.pending()
    state: ServerState = server.app.state.signoff
    answers: list[httpx.Response] = []
    waiting = threading.Thread(
        target=lambda: answers.append(
            server.client("bot").get(f"/v1/requests/{rid}/wait", params={"timeout": 60})
        )
    )
    waiting.start()
    _until_parked(state, 1)
    server.thread.stop()  # graceful: app.stop() cancels the wait, the handler answers
    waiting.join(30)
    assert [(r.status_code, r.json()["status"]) for r in answers] == [(200, "pending")]
    assert state.metrics.long_polls == 0
    assert not state.long_polls


def test_a_long_poll_after_shutdown_began_answers_without_waiting(server: Server) -> None:
    rid = server.pending()
    state: ServerState = server.app.state.signoff
    stopped = threading.Event()

    def stopping() -> None:  # on the app's loop, as app.stop() runs
        state.stopping.set()
        stopped.set()

    server.thread.server.servers[0].get_loop().call_soon_threadsafe(stopping)
    assert stopped.wait(10)
    r = server.client("bot").get(f"/v1/requests/{rid}/wait", params={"timeout": 60})
    assert r.status_code == 200 and r.json()["status"] == "pending"
    assert state.metrics.long_polls == 0


def test_a_wait_whose_client_went_away_ends_and_unregisters(server: Server) -> None:
    rid = server.pending()
    state: ServerState = server.app.state.signoff
    sock = connect(server)
    auth = f"Authorization: Bearer {server.tokens['bot']}".encode()
    sock.sendall(head("GET", f"/v1/requests/{rid}/wait?timeout=60", auth))
    _until_parked(state, 1)
    sock.close()  # the client is gone; its wait runs on until something ends it...
    decided = server.client("bob").post(
        f"/v1/requests/{rid}/decisions", json={"decisions": [{"type": "approve"}]}
    )
    assert decided.status_code == 200  # ...a decision, like any other wait
    pause = threading.Event()
    while state.long_polls:  # ends on the server's loop right after the decision
        pause.wait(0.01)
    assert state.metrics.long_polls == 0
