"""Worker processes for the PostgreSQL fault, race and wake-up tests: each is one "replica".

Usage: python -m tests.store.pg_worker COMMAND URL SCHEMA ARGS…

* ``decide REQUEST_ID APPROVER`` — approve one request and print its status (like the CLI).
* ``crash LEDGER N ROLE CLAIM_S`` — push the fixed crash set (:mod:`tests.store.crash_worker`)
  through a store, as replica ``A`` (approves) or ``B`` (rejects), each clicking twice, while
  a sweeper task expires due requests as the gate's would. Every operation is retried on
  :class:`StoreError` (the database may be restarting) — safe because each is idempotent.
  Prints ``started``, then ``done`` and a JSON line of retry counts. ``ROLE lww`` is the
  negative control: last-writer-wins writes behind the store's back.
* ``race WORKER N`` — decide every request of the race set in random order, clicking twice
  (even workers approve, odd ones reject); prints ``ready``, waits for a line on stdin,
  prints a JSON object of results.
* ``sweep SECONDS`` — run a sweeper for that long; print the JSON list of ids it expired.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO, TypeVar

import psycopg
from psycopg import sql

from signoff.model import ApprovalRequest, StoreError, Transition, utcnow
from signoff.model.resolution import apply_decisions, due_transition
from signoff.store.postgres import PostgresStore
from tests.store.crash_worker import ACTORS, crash_ids, create, decide_once, is_short
from tests.store.factories import decision
from tests.store.race_worker import click, race_ids

T = TypeVar("T")
TASKS = 8


def expire(now: Any) -> Callable[[ApprovalRequest], Transition]:
    def mutate(req: ApprovalRequest) -> Transition:
        return due_transition(req, now) or Transition(req, changed=False)

    return mutate


async def sweep_once(store: PostgresStore) -> list[str]:
    """One pass of the gate's sweeper; returns the ids this call expired."""
    now = utcnow()
    expired = []
    for request_id in await store.due_requests(now, limit=200):
        tr = await store.update_request(request_id, expire(now))
        if tr.changed and tr.request.status == "expired":
            expired.append(request_id)
    return expired


async def sweeper(store: PostgresStore, expired: list[str]) -> None:
    while True:
        with contextlib.suppress(StoreError):  # the database is away: the next pass retries
            expired += await sweep_once(store)
        await asyncio.sleep(0.1)


class Retrying:
    """Retry idempotent operations until the database answers; count what that took."""

    def __init__(self) -> None:
        self.retried = 0
        self.survived = 0  # a retry found its first attempt had committed after all

    async def __call__(self, op: Callable[[], Awaitable[T]]) -> T:
        attempts = 0
        deadline = time.monotonic() + 120
        while True:
            try:
                result = await op()
            except StoreError:
                if time.monotonic() > deadline:
                    raise
                attempts += 1
                self.retried += 1
                await asyncio.sleep(0.05)
                continue
            if attempts and result == "same":
                self.survived += 1
            return result


async def open_retrying(store: PostgresStore) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            await store.open()
            return
        except StoreError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def crash_slice(
    store: PostgresStore, ids: list[str], role: str, ledger: TextIO, retry: Retrying
) -> None:
    for request_id in ids:
        await retry(lambda rid=request_id: create(store, rid))
        if is_short(request_id):
            continue
        for _ in "12":
            result = await retry(lambda rid=request_id: decide_once(store, rid, role))
            ledger.write(f"{request_id} {role} {result}\n")
            ledger.flush()


async def last_writer_wins(store: PostgresStore, ids: list[str], ledger: TextIO) -> None:
    """The classic bug: both deciders read "pending", both write, the last one wins."""
    write = sql.SQL(
        "UPDATE {}.requests SET doc = %s::json, status = %s, version = %s WHERE id = %s"
    ).format(sql.Identifier(store.schema))
    raw = await psycopg.AsyncConnection.connect(store.dsn, autocommit=True)
    for request_id in ids:
        await create(store, request_id)
        if is_short(request_id):
            continue
        stale = [await store.get_request(request_id) for _ in "AB"]
        for actor, request in zip("AB", stale, strict=True):
            assert request is not None
            tr = apply_decisions(
                request,
                [decision(type=ACTORS[actor], approver=actor)],
                approver_roles=(),
                now=utcnow(),
            )
            new = tr.request
            await raw.execute(write, (new.model_dump_json(), new.status, new.version, request_id))
            await store.append_audit(tr.events)
            ledger.write(f"{request_id} {actor} won\n")
    await raw.close()


async def crash(store: PostgresStore, ledger_path: str, n: int, role: str) -> None:
    ids = crash_ids(n)
    random.Random(role).shuffle(ids)
    retry = Retrying()
    await open_retrying(store)
    print("started", flush=True)
    with Path(ledger_path).open("a") as ledger:
        if role == "lww":
            await last_writer_wins(store, sorted(ids), ledger)
        else:
            expired: list[str] = []
            sweeping = asyncio.create_task(sweeper(store, expired))
            await asyncio.gather(
                *(crash_slice(store, ids[k::TASKS], role, ledger, retry) for k in range(TASKS))
            )
            sweeping.cancel()
    print("done", flush=True)
    print(json.dumps({"retried": retry.retried, "survived": retry.survived}), flush=True)


async def race(store: PostgresStore, worker: int, n: int) -> None:
    order = race_ids(n)
    random.Random(worker).shuffle(order)
    kind, approver = ("approve" if worker % 2 == 0 else "reject"), f"user{worker}"
    await store.open()
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    results = {}
    for request_id in order:
        results[request_id] = [await click(store, request_id, kind, approver) for _ in "12"]
    print(json.dumps(results), flush=True)


async def sweep_for(store: PostgresStore, seconds: float) -> None:
    await store.open()
    print("ready", flush=True)
    expired: list[str] = []
    stop_at = time.monotonic() + seconds
    while time.monotonic() < stop_at:
        expired += await sweep_once(store)
        await asyncio.sleep(0.01)
    print(json.dumps(expired), flush=True)


async def main(command: str, url: str, schema: str, args: list[str]) -> None:
    claim_s = float(args[3]) if command == "crash" else 10.0
    store = PostgresStore(url, schema=schema, pool_max=TASKS + 2, claim_s=claim_s)
    try:
        if command == "decide":
            tr = await store.update_request(
                args[0],
                lambda r: apply_decisions(
                    r, [decision(approver=args[1])], approver_roles=(), now=utcnow()
                ),
            )
            print(tr.request.status, flush=True)
        elif command == "crash":
            await crash(store, args[0], int(args[1]), args[2])
        elif command == "race":
            await race(store, int(args[0]), int(args[1]))
        elif command == "sweep":
            await sweep_for(store, float(args[0]))
        else:
            raise SystemExit(f"unknown command {command}")
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))
