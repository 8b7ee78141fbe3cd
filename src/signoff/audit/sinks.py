"""Where checkpoints go: an append-only file, or an HTTPS receiver — never the database.

* :class:`FileSink` appends one line per checkpoint (``O_APPEND``, then ``fsync``), creating
  the file (mode 0640) and fsyncing its directory the first time.
* :class:`HttpSink` POSTs each checkpoint as a JSON body, directly: not through the
  notification outbox, which lives in the same database the checkpoints vouch for. Failed
  posts are kept in memory (the newest :data:`MAX_PENDING`) and retried with backoff; a
  receiver should keep every body it is given, one per line, for ``signoff audit verify
  --anchors``. ``Idempotency-Key: signer:seq`` lets it drop a repeat.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from signoff.audit.checkpoints import Checkpoint
from signoff.audit.settings import AnchorTarget
from signoff.model import SignoffError

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("signoff.audit")
MAX_PENDING = 1000


class AnchorError(SignoffError):
    """A checkpoint could not be written to its sink."""


class Sink(Protocol):
    """A place outside the database that keeps checkpoints."""

    name: str

    async def write(self, checkpoint: Checkpoint) -> None:
        """Keep ``checkpoint``; raise :class:`AnchorError` when it could not be kept (an
        HTTP sink keeps it in memory and retries instead)."""
        ...

    async def retry(self) -> None:
        """Retry what earlier writes could not deliver, if anything is due."""
        ...

    async def close(self) -> None:
        """Last delivery attempt; report what is still undelivered."""
        ...


class FileSink:
    """Appends checkpoints to a JSONL file and fsyncs each one."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.name = f"file://{self.path}"

    async def write(self, checkpoint: Checkpoint) -> None:
        try:
            await asyncio.to_thread(self._append, checkpoint.line().encode("ascii"))
        except OSError as exc:
            raise AnchorError(
                f"cannot append the audit checkpoint to {self.path}: {exc.strerror or exc}"
            ) from exc

    def _append(self, data: bytes) -> None:
        created = not self.path.exists()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(f"short write ({written} of {len(data)} bytes)")
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:  # the new directory entry must survive a crash too
            directory = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)

    async def retry(self) -> None:
        """Nothing is held back: a failed append raised, and the next checkpoint covers it."""

    async def close(self) -> None:
        pass


class HttpSink:
    """POSTs checkpoints to a receiver, keeping undelivered ones in memory."""

    def __init__(self, url: str, *, timeout_s: float = 5.0, max_backoff_s: float = 60.0) -> None:
        self.url = url
        self.name = url
        self.timeout_s = timeout_s
        self.max_backoff_s = max_backoff_s
        self.pending: deque[Checkpoint] = deque(maxlen=MAX_PENDING)
        self.delivered = 0
        self._failures = 0
        self._next_try = 0.0
        self._lock = asyncio.Lock()

    async def write(self, checkpoint: Checkpoint) -> None:
        self.pending.append(checkpoint)
        await self._deliver(force=True)

    async def retry(self) -> None:
        if self.pending:
            await self._deliver(force=False)

    async def close(self) -> None:
        if self.pending:
            await self._deliver(force=True)
        if self.pending:
            log.error(
                "audit checkpoints could not be delivered before shutdown",
                extra={"anchor": self.url, "undelivered": len(self.pending)},
            )

    async def _deliver(self, *, force: bool) -> None:
        if not force and time.monotonic() < self._next_try:
            return
        async with self._lock:
            try:
                import httpx  # the HTTP sink needs signoff[client] or signoff[server]
            except ImportError as exc:
                raise AnchorError(
                    "https audit anchors need httpx: pip install 'signoff[client]'"
                ) from exc
            async with httpx.AsyncClient(timeout=self.timeout_s) as client:
                while self.pending:
                    checkpoint = self.pending[0]
                    problem = await self._post(client, checkpoint)
                    if problem is not None:
                        self._failed(problem)
                        return
                    self.pending.popleft()
                    self.delivered += 1
            self._failures = 0

    async def _post(self, client: httpx.AsyncClient, checkpoint: Checkpoint) -> str | None:
        import httpx  # see _deliver

        try:
            response = await client.post(
                self.url,
                content=checkpoint.line().encode("ascii"),
                headers={
                    "content-type": "application/json",
                    "idempotency-key": f"{checkpoint.signer}:{checkpoint.seq}",
                },
            )
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"
        if response.status_code // 100 != 2:
            return f"HTTP {response.status_code}"
        return None

    def _failed(self, problem: str) -> None:
        self._failures += 1
        backoff = min(self.max_backoff_s, 0.5 * 2 ** min(self._failures, 16))
        self._next_try = time.monotonic() + backoff
        log.warning(
            "audit checkpoint not delivered; kept in memory and retried",
            extra={
                "anchor": self.url,
                "error": problem,
                "undelivered": len(self.pending),
                "retry_in_s": backoff,
            },
        )


def open_sink(target: AnchorTarget) -> Sink:
    """The sink for a parsed ``audit.anchor``."""
    if target.kind == "file":
        return FileSink(target.where)
    return HttpSink(target.where)
