"""A store that commits on the waiter's own event loop (the MemoryStore) wakes it with
``call_soon``, not a thread-safe hop (a self-pipe write and one more turn of the loop); a
waiter on another loop (the SQLite writer's commits) is still woken through that loop."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from signoff.store import MemoryStore, SQLiteStore, Store
from tests.store.factories import created_events, decide, decision, make_request


class HopCounter:
    """Counts ``call_soon_threadsafe`` on the running loop, by the thread that called it."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.threads: list[threading.Thread] = []
        self._original = self.loop.call_soon_threadsafe

    def __enter__(self) -> HopCounter:
        def counting(*args: Any, **kwargs: Any) -> Any:
            self.threads.append(threading.current_thread())
            return self._original(*args, **kwargs)

        self.loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        del self.loop.call_soon_threadsafe  # the class's method again


async def waiting_on_new_request(store: Store, waiting_ids: Any) -> tuple[str, asyncio.Task[Any]]:
    request = make_request()
    await store.create_request(request, created_events(request))
    waiter = asyncio.ensure_future(store.wait(request.id))
    while request.id not in waiting_ids():  # registered (its first read may still be running)
        await asyncio.sleep(0)
    return request.id, waiter


async def waiting_on_another_loop(store: SQLiteStore, request_id: str) -> asyncio.Future[str]:
    """A thread of its own runs an event loop that waits for ``request_id``; returned once the
    waiter is registered, it resolves to the status the waiter woke with."""
    registered = threading.Event()

    def wait_in_another_loop() -> str:
        async def wait() -> str:
            task = asyncio.ensure_future(store.wait(request_id))
            while request_id not in store._waiters.ids():
                await asyncio.sleep(0)
            registered.set()
            return (await task).status

        return asyncio.run(wait())

    other = asyncio.ensure_future(asyncio.to_thread(wait_in_another_loop))
    await asyncio.to_thread(registered.wait, 30)
    return other


async def test_sqlite_waiter_on_another_loop_is_woken_with_the_decision(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        request = make_request()
        await store.create_request(request, created_events(request))
        other = await waiting_on_another_loop(store, request.id)
        await decide(store, request.id, decision())
        assert await other == "resolved"


async def test_memory_store_wakes_a_waiter_on_its_own_loop_without_a_threadsafe_hop() -> None:
    async with MemoryStore() as store:
        request_id, waiter = await waiting_on_new_request(store, store._waiters.ids)
        with HopCounter() as hops:
            await decide(store, request_id, decision())
            woken = await waiter
        assert woken.status == "resolved"
        assert hops.threads == []
