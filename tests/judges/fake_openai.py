"""A loopback server speaking the OpenAI chat-completions wire format, for judge tests.

It runs uvicorn + Starlette on 127.0.0.1 (an ephemeral port) inside the test's event loop,
records every request (headers and JSON body) and answers from a script: model content, a
refusal, an HTTP status, a raw body, or a hang until the test sets :attr:`release`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

Reply = Callable[["FakeOpenAI", dict[str, Any]], Awaitable[Response]]


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body["messages"])

    @property
    def user_content(self) -> str:
        return str(self.messages[1]["content"])


def completion(content: str | None, *, refusal: str | None = None, finish: str = "stop") -> Any:
    """A chat.completion object as the API returns it."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "logprobs": None,
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def answer(verdict: str, reason: str = "because") -> Reply:
    """The model answers ``{"verdict", "reason"}`` as its message content."""
    return content(json.dumps({"verdict": verdict, "reason": reason}))


def content(text: str | None) -> Reply:
    async def reply(fake: FakeOpenAI, body: dict[str, Any]) -> Response:
        return JSONResponse(completion(text))

    return reply


def refusal(text: str) -> Reply:
    async def reply(fake: FakeOpenAI, body: dict[str, Any]) -> Response:
        return JSONResponse(completion(None, refusal=text))

    return reply


def status(code: int) -> Reply:
    async def reply(fake: FakeOpenAI, body: dict[str, Any]) -> Response:
        error = {"message": "upstream failed", "type": "server_error", "code": None}
        return JSONResponse({"error": error}, status_code=code)

    return reply


def raw(body_bytes: bytes, media_type: str = "application/json") -> Reply:
    async def reply(fake: FakeOpenAI, body: dict[str, Any]) -> Response:
        return Response(body_bytes, media_type=media_type)

    return reply


def hang_then(then: Reply) -> Reply:
    """Wait until the test sets ``fake.release``, then answer with ``then``."""

    async def reply(fake: FakeOpenAI, body: dict[str, Any]) -> Response:
        fake.hanging.set()
        await fake.release.wait()
        return await then(fake, body)

    return reply


@dataclass
class FakeOpenAI:
    reply: Reply = field(default_factory=lambda: answer("consistent"))
    received: list[Received] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    hanging: asyncio.Event = field(default_factory=asyncio.Event)
    port: int = 0
    _server: uvicorn.Server | None = None
    _task: asyncio.Task[None] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _handle(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self.received.append(Received(request.url.path, dict(request.headers), body))
        return await self.reply(self, body)

    async def start(self) -> None:
        app = Starlette(routes=[Route("/v1/chat/completions", self._handle, methods=["POST"])])
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", access_log=False
        )
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises what failed
            await asyncio.sleep(0.005)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.release.set()
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
