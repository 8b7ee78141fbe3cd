"""The checkpoint writer: when it writes, where (a file, an HTTP receiver on loopback), and
that a failing sink never stops it."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from signoff.audit import (
    Anchorer,
    Checkpoint,
    FileSink,
    HttpSink,
    read_checkpoints,
    signature_ok,
)
from signoff.model import AuditEvent
from signoff.store import MemoryStore

KEY = b"0123456789abcdef0123456789abcdef"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def add_events(store: MemoryStore, n: int) -> None:
    await store.append_audit([AuditEvent(event="allowed", tool="t") for _ in range(n)])


def anchorer(
    store: MemoryStore, path: Path, *, every: int = 100, interval: float = 10.0
) -> tuple[Anchorer, Clock]:
    clock = Clock()
    made = Anchorer(
        store, FileSink(path), KEY, signer="test", every=every, interval=interval, clock=clock
    )
    return made, clock


def lines(path: Path) -> list[Checkpoint]:
    return [cp for _, cp in read_checkpoints(path)[0]] if path.exists() else []


async def test_nothing_is_written_for_an_empty_log(tmp_path: Path) -> None:
    writer, _ = anchorer(MemoryStore(), tmp_path / "a.jsonl")
    assert await writer.step() is None
    assert await writer.anchor() is None
    assert not (tmp_path / "a.jsonl").exists()


async def test_the_first_look_checkpoints_then_every_n_events(tmp_path: Path) -> None:
    store, path = MemoryStore(), tmp_path / "a.jsonl"
    writer, _ = anchorer(store, path, every=3)
    await add_events(store, 1)
    first = await writer.step()
    assert first is not None and first.seq == 1
    await add_events(store, 2)
    assert await writer.step() is None  # 2 of 3
    await add_events(store, 1)
    assert (await writer.step()) is not None
    assert [cp.seq for cp in lines(path)] == [1, 4]
    head = await store.audit_head()
    assert (lines(path)[-1].seq, lines(path)[-1].hash) == head
    assert all(signature_ok(KEY, cp) and cp.signer == "test" for cp in lines(path))


async def test_every_interval_but_only_when_something_changed(tmp_path: Path) -> None:
    store, path = MemoryStore(), tmp_path / "a.jsonl"
    writer, clock = anchorer(store, path, every=1000, interval=10)
    await add_events(store, 1)
    await writer.step()
    clock.now = 60
    assert await writer.step() is None  # nothing new: no checkpoint, however long
    await add_events(store, 1)
    assert await writer.step() is not None  # new after a quiet spell: at once
    await add_events(store, 1)
    clock.now = 65
    assert await writer.step() is None  # new, but 5 s after the last checkpoint
    clock.now = 70
    assert await writer.step() is not None
    assert [cp.seq for cp in lines(path)] == [1, 2, 3]


async def test_stop_flushes_queued_events_and_writes_a_last_checkpoint(tmp_path: Path) -> None:
    store, path = MemoryStore(), tmp_path / "a.jsonl"
    writer, _ = anchorer(store, path, every=1000, interval=3600)
    writer.start()
    await add_events(store, 2)
    store.audit_nowait(AuditEvent(event="denied", tool="t"))  # queued, not yet written
    final = await writer.stop()
    assert final is not None and final.seq == 3
    assert lines(path)[-1] == final


async def test_a_failing_file_sink_is_logged_and_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, path = MemoryStore(), tmp_path / "missing-dir" / "a.jsonl"
    writer, _ = anchorer(store, path, every=1)
    await add_events(store, 1)
    writer.start()
    await writer.stop()
    assert "audit checkpoint not written" in caplog.text and "missing-dir" in caplog.text
    path.parent.mkdir()
    assert await writer.step() is not None  # the head was never checkpointed: retried


async def test_the_file_is_append_only_and_created_private(tmp_path: Path) -> None:
    store, path = MemoryStore(), tmp_path / "a.jsonl"
    path.write_text("kept\n")
    path.chmod(0o600)
    writer, _ = anchorer(store, path, every=1)
    await add_events(store, 1)
    await writer.anchor()
    assert path.read_text().startswith("kept\n")
    fresh = tmp_path / "b.jsonl"
    await FileSink(fresh).write(lines(path)[0])
    assert fresh.stat().st_mode & 0o777 == 0o640


class Receiver:
    """An HTTP receiver on loopback keeping every body it accepts; ``refuse`` answers 503."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, object]] = []
        self.keys: list[str] = []
        self.refuse = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                if receiver.refuse:
                    receiver.refuse -= 1
                    self.send_response(503)
                else:
                    receiver.bodies.append(json.loads(body))
                    receiver.keys.append(self.headers["idempotency-key"])
                    self.send_response(201)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/anchors"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.close()


async def test_checkpoints_are_posted_to_an_http_receiver(receiver: Receiver) -> None:
    store = MemoryStore()
    writer = Anchorer(store, HttpSink(receiver.url), KEY, signer="web-1", every=1)
    await add_events(store, 2)
    cp = await writer.anchor()
    assert cp is not None
    assert receiver.bodies == [cp.to_json()]
    assert receiver.keys == ["web-1:2"]


async def test_refused_posts_are_kept_in_memory_and_retried(receiver: Receiver) -> None:
    store = MemoryStore()
    sink = HttpSink(receiver.url, max_backoff_s=0)
    writer = Anchorer(store, sink, KEY, signer="web-1", every=1)
    receiver.refuse = 3
    await add_events(store, 1)
    await writer.anchor()  # refused: kept
    await add_events(store, 1)
    await writer.anchor()  # refused again: both kept, in order
    assert len(sink.pending) == 2 and receiver.bodies == []
    await writer.step()  # nothing new to sign; the retry is refused once more
    await writer.step()  # delivered
    assert [b["seq"] for b in receiver.bodies] == [1, 2]
    assert not sink.pending and sink.delivered == 2


async def test_an_unreachable_receiver_never_fails_the_writer(receiver: Receiver) -> None:
    url = receiver.url
    receiver.close()
    store = MemoryStore()
    sink = HttpSink(url, timeout_s=2, max_backoff_s=0)
    writer = Anchorer(store, sink, KEY, signer="web-1", every=1)
    await add_events(store, 1)
    writer.start()
    await asyncio.sleep(0)
    assert await writer.stop() is None  # the head was already signed; still undelivered
    assert len(sink.pending) == 1
