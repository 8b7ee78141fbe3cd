"""A loopback OpenAI-compatible chat-completions server that answers after a fixed delay.

``python -m benchmarks._judge_server PORT_FILE DELAY_MS`` — writes its port to PORT_FILE,
then serves until killed. Every answer is ``{"verdict": "consistent", ...}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

CONTENT = json.dumps({"verdict": "consistent", "reason": "the call matches the request"})


def main(port_file: Path, delay_ms: float) -> None:
    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        await asyncio.sleep(delay_ms / 1000.0)
        return JSONResponse(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "bench"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": CONTENT},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False)
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        port_file.write_text(str(port), encoding="utf-8")
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main(Path(sys.argv[1]), float(sys.argv[2]))
