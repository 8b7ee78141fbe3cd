"""A loopback HTTP server standing in for every provider's API (Slack, Discord, LINE, Teams,
Telegram, Feishu/Lark, DingTalk, webhook subscribers): it records each request and answers
from a script.

Clients are pointed at it by base URL (``api_url``, ``webhook_url``…), exactly as they
would be at the real service; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


@dataclass
class Recorded:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)

    def json(self) -> Any:
        return json.loads(self.body)


Answer = tuple[int, dict[str, str], bytes]
Responder = Callable[["Receiver", Recorded], Answer | None]


_ids = itertools.count(100)


def _next_id() -> int:
    return next(_ids)


def default_answer(req: Recorded) -> Answer:
    """What each provider answers on success."""
    if "/slack/" in req.path:
        body: Any = {"ok": True, "channel": "D" + req.path[-4:].upper(), "ts": f"{time.time():.6f}"}
    elif "/discord" in req.path:
        body = {"id": f"m{int(time.monotonic() * 1e6)}"}
    elif "/telegram/" in req.path:
        chat = json.loads(req.body or b"{}").get("chat_id")
        body = {"ok": True, "result": {"message_id": _next_id(), "chat": {"id": chat}}}
        if req.path.endswith("/getMe"):
            body = {"ok": True, "result": {"id": 1, "is_bot": True, "username": "signoff_bot"}}
    elif "/feishu/" in req.path:
        body = {"code": 0, "msg": "success", "data": {"message_id": f"om_{_next_id()}"}}
        if req.path.endswith("/tenant_access_token/internal"):
            body = {"code": 0, "msg": "ok", "tenant_access_token": "t-feishu", "expire": 7200}
    elif "/dingtalk/" in req.path:
        body = {"success": True, "result": {"deliverResults": [{"success": True}]}}
        if req.path.endswith("/oauth2/accessToken"):
            body = {"accessToken": "dt-token", "expireIn": 7200}
    else:
        body = {}
    return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # the default 5 drops concurrent connects (1 s SYN retry)
    daemon_threads = True


class Receiver:
    """Records requests; ``script`` answers (per path prefix, first match, consumed in order)
    override the provider's default success answer."""

    def __init__(self, responder: Responder | None = None) -> None:
        self.requests: list[Recorded] = []
        self.responder = responder
        self.scripts: list[tuple[str, Answer]] = []
        self.delay_s = 0.0
        self.hang = threading.Event()  # set: requests block until released
        self._cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body in separate writes: no 40 ms stall

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                rec = Recorded(
                    self.command,
                    parts.path,
                    parts.query,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                status, headers, out = receiver._answer(rec)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

            def log_message(self, *args: object) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def script(self, prefix: str, *answers: Answer) -> None:
        """Answer the next requests under ``prefix`` with these, in order."""
        with self._cond:
            self.scripts.extend((prefix, a) for a in answers)

    def _answer(self, rec: Recorded) -> Answer:
        with self._cond:
            answer: Answer | None = None
            for i, (prefix, scripted) in enumerate(self.scripts):
                if rec.path.startswith(prefix):
                    answer = scripted
                    del self.scripts[i]
                    break
            self.requests.append(rec)
            self._cond.notify_all()
        while self.hang.is_set():  # recorded, but no answer yet
            time.sleep(0.01)
        if answer is None and self.responder is not None:
            answer = self.responder(self, rec)
        return answer or default_answer(rec)

    def under(self, prefix: str) -> list[Recorded]:
        with self._cond:
            return [r for r in self.requests if r.path.startswith(prefix)]

    def wait_for(self, prefix: str, count: int = 1, timeout: float = 10.0) -> list[Recorded]:
        """Block until ``count`` requests under ``prefix`` arrived; returns them."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [r for r in self.requests if r.path.startswith(prefix)]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"expected {count} request(s) under {prefix}, got {len(found)}: "
                        + ", ".join(f"{r.method} {r.path}" for r in self.requests)
                    )
                self._cond.wait(left)

    def close(self) -> None:
        self.hang.clear()
        self.server.shutdown()
        self.server.server_close()


def answer(status: int, body: Any = None, **headers: str) -> Answer:
    data = (
        body if isinstance(body, bytes) else json.dumps(body if body is not None else {}).encode()
    )
    return (
        status,
        {
            "Content-Type": "application/json",
            **{k.replace("_", "-"): v for k, v in headers.items()},
        },
        data,
    )
