"""Worker process for the cross-process resume benchmark: another reader of the same file.

Run as ``python -m benchmarks._waiter CONFIG``. It opens its own :class:`Gate` on the config's
SQLite file (like a second agent, ``signoff serve`` or an MCP proxy next to the benchmark's
agent), prints ``{"ready": true}``, then for each line ``{"id": REQUEST_ID}`` on stdin waits
on that request in the background and answers ``{"waiting": ID}`` once its store has
registered the waiter and read the row, and later ``{"id": ID, "woke_ns": ...}``
(``time.monotonic_ns()``) when the wait returns.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from signoff import Gate, Policy


def say(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def wait_one(gate: Gate, request_id: str) -> None:
    request = await gate.store.wait(request_id, timeout=60)
    say({"id": request_id, "woke_ns": time.monotonic_ns(), "status": request.status})


async def main(config: str) -> None:
    gate = Gate(Policy.load(config))
    await gate.astart()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    say({"ready": True})
    tasks = set()
    try:
        while line := await reader.readline():
            request_id = json.loads(line)["id"]
            before = gate.store.stats()["waiters"]
            task = asyncio.create_task(wait_one(gate, request_id))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            while gate.store.stats()["waiters"] <= before:  # registered
                await asyncio.sleep(0.0002)
            await asyncio.sleep(0.002)  # and parked on its future after the first read
            say({"waiting": request_id})
    finally:
        await gate.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
