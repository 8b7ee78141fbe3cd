"""Group-commit worker: 8 agents run full approval cycles on one SQLite store until killed.

Usage: python -m tests.store.group_commit_worker DB RANLOG N

Each agent takes every 8th of the N fixed request ids and, for each, creates the request,
approves it, claims ``executing`` on the exactly-once ledger, runs the "tool" (one line
``ran ID`` appended to RANLOG) and records ``executed``. Every answered store call prints one
line ``OP ID`` (``created``, ``decided``, ``claimed``, ``finished``) on stdout *after* the
store answered: what the parent saw printed must be in the database after a SIGKILL.

A restarted worker goes over every id again: a create finds the stored request, a decision
on a decided request is refused, and a claim on a claimed call raises AlreadyExecuted (the
tool is not run again), which is the exactly-once promise under test.
"""

from __future__ import annotations

import asyncio
import os
import sys

from signoff.model import AlreadyDecided, AlreadyExecuted, utcnow
from signoff.model.resolution import mark_execution
from signoff.store import SQLiteStore
from tests.store.factories import created_events, decide, decision, make_request

AGENTS = 8


def cycle_ids(n: int) -> list[str]:
    return [f"cycle-{i:04d}" for i in range(n)]


def say(op: str, request_id: str) -> None:
    sys.stdout.write(f"{op} {request_id}\n")
    sys.stdout.flush()


async def cycle(store: SQLiteStore, request_id: str, ranlog: int) -> None:
    request = make_request(request_id=request_id, thread=request_id)
    await store.create_request(request, created_events(request))
    say("created", request_id)
    try:
        await decide(store, request_id, decision(type="approve", approver="A"))
        say("decided", request_id)
    except AlreadyDecided:
        pass
    try:
        await store.update_request(
            request_id, lambda r: mark_execution(r, "call-1", "executing", now=utcnow())
        )
    except AlreadyExecuted:
        return  # claimed before a restart: never run twice
    say("claimed", request_id)
    os.write(ranlog, f"ran {request_id}\n".encode())  # O_APPEND: one whole line per write
    await store.update_request(
        request_id, lambda r: mark_execution(r, "call-1", "executed", now=utcnow())
    )
    say("finished", request_id)


async def agent(store: SQLiteStore, ids: list[str], ranlog: int) -> None:
    for request_id in ids:
        await cycle(store, request_id, ranlog)


async def main(path: str, ranlog_path: str, n: int) -> None:
    ids = cycle_ids(n)
    ranlog = os.open(ranlog_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        async with SQLiteStore(path) as store:
            print("started", flush=True)
            await asyncio.gather(*(agent(store, ids[k::AGENTS], ranlog) for k in range(AGENTS)))
    finally:
        os.close(ranlog)
    print("done", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
