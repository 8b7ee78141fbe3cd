"""``update_request`` runs as a ``SelfAtomic`` job in a SQLite group: no SAVEPOINT/RELEASE
around its one UPDATE; a savepoint only when it writes more (grants, a quarantine mark), and a
failure before or in its UPDATE leaves nothing of it in the group."""

from __future__ import annotations

from pathlib import Path

import pytest

from signoff.model import ApprovalRequest, StoreError, Transition
from signoff.model.grants import Grant
from signoff.store import SQLiteStore
from signoff.store.base import Mutation
from tests.store.factories import make_grant
from tests.store.test_sqlite_doc_cache import create, note, raw_doc
from tests.store.test_sqlite_group_commit import HeldWriter


async def test_updates_in_a_group_run_without_savepoints(tmp_path: Path) -> None:
    seen: list[str] = []
    async with SQLiteStore(tmp_path / "s.db") as store:
        for i in range(3):
            await create(store, f"r{i}")
        await store._write(lambda conn: conn.set_trace_callback(seen.append))
        async with HeldWriter(store) as held:
            tasks = await held.queue(*(store.update_request(f"r{i}", note("x")) for i in range(3)))
        for task in tasks:
            assert (await task).request.version == 1
        assert not [s for s in seen if s.startswith(("SAVEPOINT", "RELEASE"))]
        assert len([s for s in seen if s.startswith("UPDATE requests")]) == 3
        assert (await store.verify_audit()).ok


async def test_a_mutation_failing_mid_group_leaves_nothing_and_the_others_commit(
    tmp_path: Path,
) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        for i in range(3):
            await create(store, f"r{i}")

        def fails(req: ApprovalRequest) -> Transition:
            req.waiter = "never"
            raise RuntimeError("mutation failed")

        async with HeldWriter(store) as held:
            a, bad, b = await held.queue(
                store.update_request("r0", note("a")),
                store.update_request("r1", fails),
                store.update_request("r2", note("b")),
            )
        assert (await a).request.waiter == "a" and (await b).request.waiter == "b"
        with pytest.raises(RuntimeError, match="mutation failed"):
            await bad
        version, doc = raw_doc(tmp_path / "s.db", "r1")
        assert version == 0 and doc["waiter"] is None
        events = [(r.request_id, r.actor) for r in await store.read_audit()][-2:]
        assert events == [("r0", "a"), ("r2", "b")]
        assert (await store.verify_audit()).ok


async def test_an_update_with_grants_takes_a_savepoint_and_rolls_back_alone(
    tmp_path: Path,
) -> None:
    seen: list[str] = []
    async with SQLiteStore(tmp_path / "s.db") as store:
        await create(store, "r0")
        await create(store, "r1")
        stored = make_grant(grant_id="g-stored", thread="r0")
        await store.create_grant(stored, [])
        fresh = make_grant(grant_id="g-fresh", thread="r0")

        def with_grant(grant: Grant) -> Mutation:
            def mutate(req: ApprovalRequest) -> Transition:
                req.waiter = "granted"
                return Transition(req, [], grants=[grant])

            return mutate

        await store._write(lambda conn: conn.set_trace_callback(seen.append))
        async with HeldWriter(store) as held:
            good, dup = await held.queue(
                store.update_request("r0", with_grant(fresh)),
                store.update_request("r1", with_grant(stored)),
            )
        assert (await good).request.waiter == "granted"
        with pytest.raises(StoreError):
            await dup
        assert len([s for s in seen if s.startswith("SAVEPOINT")]) == 2
        assert raw_doc(tmp_path / "s.db", "r1")[1]["waiter"] is None
        assert {g.id for g in await store.list_grants()} == {"g-stored", "g-fresh"}
