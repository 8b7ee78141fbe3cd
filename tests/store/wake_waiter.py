"""A process waiting on one request of a SQLite store, woken only by the doorbell.

Usage: python -m tests.store.wake_waiter DB REQUEST_ID

Its store polls ``data_version`` once an hour, so a wake-up within a test's timeout comes from
the doorbell. Prints ``waiting SOCKET`` once its watcher's socket is bound, then the status the
request ended in.
"""

from __future__ import annotations

import asyncio
import sys

from signoff.store import SQLiteStore


async def main(path: str, request_id: str) -> None:
    async with SQLiteStore(path, wake_interval_s=3600) as store:
        waiting = asyncio.ensure_future(store.wait(request_id, timeout=600))
        while not store.stats()["doorbell"]:
            await asyncio.sleep(0.005)
        print("waiting", store._doorbell._own, flush=True)
        request = await waiting
        print(request.status, flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
