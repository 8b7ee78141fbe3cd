"""Decide one request in a SQLite store from a separate process (like `signoff decide` would).

Usage: python -m tests.store.decide_once DB REQUEST_ID APPROVER   (approves)
"""

from __future__ import annotations

import asyncio
import sys

from signoff.store import SQLiteStore
from tests.store.factories import decide, decision


async def main(path: str, request_id: str, approver: str) -> None:
    async with SQLiteStore(path) as store:
        transition = await decide(store, request_id, decision(approver=approver))
        print(transition.request.status, flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
