"""Submit, wait and decide skip the router; every other request, and every error, answers as
the router would (signoff.server.hot_routes)."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.responses import Response

from signoff.server.hot_routes import HotRoutes
from tests.server.conftest import Server, transfer


async def _never(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("not reached")


async def _endpoint(request: Any) -> Response:
    return Response()


def _hot() -> HotRoutes:
    return HotRoutes(_never, submit=_endpoint, wait=_endpoint, decide=_endpoint, handlers={})


def _scope(method: str, path: str, **extra: Any) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "root_path": "", **extra}


@pytest.mark.parametrize(
    ("method", "path", "request_id"),
    [
        ("POST", "/v1/requests", None),
        ("GET", "/v1/requests/req_1/wait", "req_1"),
        ("POST", "/v1/requests/req_1/decisions", "req_1"),
    ],
)
def test_the_three_cycle_routes_are_dispatched_directly(
    method: str, path: str, request_id: str | None
) -> None:
    found = _hot().endpoint(_scope(method, path))
    assert found is not None and found[1] == request_id


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/requests"),  # the listing: another handler
        ("HEAD", "/v1/requests/req_1/wait"),  # the router answers HEAD for GET routes
        ("POST", "/v1/requests/req_1/wait"),  # 405 from the router
        ("GET", "/v1/requests/req_1/decisions"),
        ("GET", "/v1/requests//wait"),  # `{id}` is one non-empty segment
        ("GET", "/v1/requests/a/b/wait"),
        ("GET", "/v1/requests/req_1/wait/"),
        ("POST", "/v1/requests/"),
        ("GET", "/v1/requests/req_1"),
        ("POST", "/v1/inquiries"),
    ],
)
def test_everything_else_goes_to_the_router(method: str, path: str) -> None:
    assert _hot().endpoint(_scope(method, path)) is None


def test_a_mounted_app_goes_to_the_router() -> None:
    assert _hot().endpoint(_scope("POST", "/v1/requests", root_path="/signoff")) is None


def test_wrong_method_on_a_hot_path_is_the_routers_405(server: Server) -> None:
    rid = server.pending()
    r = server.client("alice").get(f"/v1/requests/{rid}/decisions")
    assert r.status_code == 405
    assert r.json()["error"] == "method_not_allowed"
    assert r.headers["allow"] == "POST"


def test_head_on_wait_is_still_answered_by_the_router(server: Server) -> None:
    rid = server.pending()
    r = server.client("bot").head(f"/v1/requests/{rid}/wait", params={"timeout": 0})
    assert r.status_code == 200


def test_errors_on_hot_routes_keep_their_json_shape(server: Server) -> None:
    bot, alice = server.client("bot"), server.client("alice")
    r = bot.post("/v1/requests", json={"tool_calls": [{"id": "c", "name": "x", "args": 3}]})
    assert (r.status_code, r.json()["error"], r.json()["field"]) == (
        422,
        "invalid",
        "tool_calls.0.args",
    )
    r = bot.get("/v1/requests/req_nope/wait", params={"timeout": 0})
    assert (r.status_code, r.json()["error"]) == (404, "not_found")  # a SignoffError
    rid = server.pending()
    r = alice.post(f"/v1/requests/{rid}/decisions", json={"decisions": [{"type": "maybe"}]})
    assert (r.status_code, r.json()["error"]) == (422, "invalid_decision")
    r = bot.post(f"/v1/requests/{rid}/decisions", json={"decisions": [{"type": "approve"}]})
    assert r.status_code == 403


def test_a_bug_in_a_hot_handler_is_the_same_500(server: Server, monkeypatch: Any) -> None:
    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(server.gate, "asubmit", broken)
    r = server.client("bot").post("/v1/requests", json={"tool_calls": [transfer()]})
    assert r.status_code == 500
    assert r.json()["error"] == "internal_error"
