"""Race worker: decide every request of the race set, in random order, clicking twice.

Usage: python -m tests.store.race_worker DB WORKER_NUMBER N
Even workers approve, odd workers reject; each is a different approver. Prints ``ready``,
waits for a line on stdin (so all workers start together), then prints one JSON object:
request id -> [first click, second click], each ``won`` | ``same`` | ``conflict``.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys

from signoff.model import AlreadyDecided
from signoff.store import SQLiteStore
from tests.store.factories import decide, decision


def race_ids(n: int) -> list[str]:
    return [f"race-{i:04d}" for i in range(n)]


async def click(store: SQLiteStore, request_id: str, kind: str, approver: str) -> str:
    try:
        transition = await decide(store, request_id, decision(type=kind, approver=approver))
    except AlreadyDecided:
        return "conflict"
    return "won" if transition.changed else "same"


async def main(path: str, worker: int, n: int) -> None:
    order = race_ids(n)
    random.Random(worker).shuffle(order)
    kind, approver = ("approve" if worker % 2 == 0 else "reject"), f"user{worker}"
    results: dict[str, list[str]] = {}
    async with SQLiteStore(path, busy_timeout_ms=60_000) as store:
        print("ready", flush=True)
        sys.stdin.readline()
        for request_id in order:
            results[request_id] = [await click(store, request_id, kind, approver) for _ in "12"]
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
