"""Crash worker: push a fixed set of requests and decisions into a SQLite store.

Usage: python -m tests.store.crash_worker DB LEDGER N MODE        (MODE: ok | lww)

Every operation is retried from the start after a crash, so each must be idempotent: request
ids and tool-call ids are chosen here, a repeated create finds the stored request, a repeated
decision is either an exact repeat (``same``) or refused (``conflict``). Every tenth request
gets a deadline of about a second and no decision: the sweeper must expire it later. For the
others A approves and B rejects, and whoever goes first clicks twice.

The ledger gets one line per answered decision: ``request_id actor won|same|conflict``. A
decision whose answer was lost to SIGKILL has no line; that is the "outcome unknown" case.

MODE ``lww`` is the negative control: decisions are written with an unconditional
last-writer-wins UPDATE on a stale read, bypassing ``update_request`` (the classic bug).
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from pathlib import Path
from typing import TextIO

from signoff.model import AlreadyDecided, utcnow
from signoff.model.resolution import apply_decisions
from signoff.store import SQLiteStore
from tests.store.factories import created_events, decide, decision, make_request

TASKS = 8
ACTORS = {"A": "approve", "B": "reject"}


def crash_ids(n: int) -> list[str]:
    return [f"crash-{i:04d}" for i in range(n)]


def is_short(request_id: str) -> bool:
    return int(request_id[-4:]) % 10 == 0


def clicks(request_id: str) -> list[str]:
    return ["A", "B", "A"] if int(request_id[-4:]) % 2 == 0 else ["B", "A", "B"]


async def create(store: SQLiteStore, request_id: str) -> None:
    timeout = 0.6 + int(request_id[-4:]) % 7 * 0.1 if is_short(request_id) else 3600.0
    request = make_request(request_id=request_id, thread=request_id, timeout_s=timeout)
    await store.create_request(request, created_events(request))


async def decide_once(store: SQLiteStore, request_id: str, actor: str) -> str:
    try:
        tr = await decide(store, request_id, decision(type=ACTORS[actor], approver=actor))
    except AlreadyDecided:
        return "conflict"
    return "won" if tr.changed else "same"


async def run_slice(store: SQLiteStore, ids: list[str], ledger: TextIO) -> None:
    for request_id in ids:
        await create(store, request_id)
        if is_short(request_id):
            continue
        for actor in clicks(request_id):
            result = await decide_once(store, request_id, actor)
            ledger.write(f"{request_id} {actor} {result}\n")
            ledger.flush()


async def last_writer_wins(store: SQLiteStore, ids: list[str], ledger: TextIO) -> None:
    raw = sqlite3.connect(store.path, isolation_level=None, timeout=30)
    for request_id in ids:
        await create(store, request_id)
        if is_short(request_id):
            continue
        stale = [await store.get_request(request_id) for _ in "AB"]  # both read "pending"
        for actor, request in zip("AB", stale, strict=True):
            assert request is not None
            tr = apply_decisions(
                request,
                [decision(type=ACTORS[actor], approver=actor)],
                approver_roles=(),
                now=utcnow(),
            )
            raw.execute(
                "UPDATE requests SET doc = ?, status = ?, version = ? WHERE id = ?",
                (tr.request.model_dump_json(), tr.request.status, tr.request.version, request_id),
            )
            await store.append_audit(tr.events)
            ledger.write(f"{request_id} {actor} won\n")
    raw.close()


async def main(path: str, ledger_path: str, n: int, mode: str) -> None:
    ids = crash_ids(n)
    with Path(ledger_path).open("a") as ledger:
        async with SQLiteStore(path) as store:
            print("started", flush=True)
            if mode == "lww":
                await last_writer_wins(store, ids, ledger)
            else:
                await asyncio.gather(
                    *(run_slice(store, ids[k::TASKS], ledger) for k in range(TASKS))
                )
    print("done", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
