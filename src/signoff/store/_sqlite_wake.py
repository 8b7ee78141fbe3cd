"""Cross-process doorbell for SQLite: one datagram socket per watching store, in a directory
beside the database.

SQLite has no push channel between processes. Each store whose watcher runs (someone in the
process waits or listens) binds a Unix datagram socket in ``<database>-wake/``; every store
rings every socket there but its own — one empty datagram, non-blocking — right after a write
transaction commits. The watcher sleeps in ``select`` on its socket and, when it rings, checks
``PRAGMA data_version`` at once: the datagram is only a hint, the database stays the truth.

* No polling loop while the doorbell works: the watcher still looks at ``data_version`` every
  ``safety_s`` (1 s) for writers that cannot ring (another user's process, the sqlite3 shell,
  an older signoff). Where no socket can be bound (no Unix sockets, a read-only directory)
  the watcher falls back to polling ``data_version`` every ``wake_interval_s``.
* A process that dies leaves its socket file behind: the next ring gets ``ECONNREFUSED`` and
  removes it. A full receive buffer (``EAGAIN``) means that watcher is awake anyway.
* Socket paths are limited to 107 bytes; when ``<database>-wake/`` would be longer, the
  directory is ``$XDG_RUNTIME_DIR`` (or the temp dir) ``/signoff-wake-<hash of the path>``,
  which every process computes the same way.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import secrets
import select
import socket
import tempfile
import threading
import time

log = logging.getLogger("signoff.store")

_MAX_SUN_PATH = 107
_NAME_LEN = 24  # "<pid>-<hex>.s", generously
# Directory timestamps are coarse on many systems (a jiffy on Linux before 6.13's multigrain
# timestamps, 1-2 s on some filesystems): a socket bound in the same tick as the last change
# does not change the mtime a listing was keyed on.
_RACY_NS = 2_000_000_000


def wake_dir(db_path: str) -> str:
    """The doorbell directory of the database at ``db_path`` (same for every process)."""
    real = os.path.realpath(db_path)
    beside = real + "-wake"
    if len(beside) + 1 + _NAME_LEN <= _MAX_SUN_PATH:
        return beside
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    digest = hashlib.sha256(real.encode()).hexdigest()[:16]
    return os.path.join(base, f"signoff-wake-{digest}")


class Doorbell:
    """Rings the other processes' watchers after a commit; owns this process's socket."""

    def __init__(self, db_path: str) -> None:
        self.dir = wake_dir(db_path)
        self._own: str | None = None
        self._sock: socket.socket | None = None
        self._sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sender.setblocking(False)
        # (directory mtime, peer paths, whether that mtime is too old to hide a later change)
        self._listing: tuple[int, list[str], bool] = (-1, [], False)
        self._lock = threading.Lock()
        self._unusable = False
        self.rings = 0
        self.stale_removed = 0

    # ---------------------------------------------------------------- receiving
    def listen(self) -> socket.socket | None:
        """Bind this store's socket (once); None when the doorbell cannot work here."""
        with self._lock:
            if self._sock is not None or self._unusable:
                return self._sock
            path = os.path.join(self.dir, f"{os.getpid()}-{secrets.token_hex(4)}.s")
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._own = path  # before the file exists: a ring from now on leaves it out
            try:
                os.makedirs(self.dir, mode=0o700, exist_ok=True)
                sock.bind(path)
                sock.setblocking(False)
            except OSError as exc:
                sock.close()
                self._own = None
                self._unusable = True  # said once; polling from now on
                log.warning(
                    "cross-process wake-up falls back to polling: cannot bind a socket in %s (%s)",
                    self.dir,
                    exc,
                )
                return None
            self._sock = sock
            return sock

    def drain(self) -> None:
        sock = self._sock
        if sock is None:
            return
        with contextlib.suppress(OSError):  # BlockingIOError once it is empty
            while True:
                sock.recv(16)

    def wait(self, timeout: float) -> bool:
        """Sleep until the socket rings or ``timeout`` passes; True when it rang."""
        sock = self._sock
        if sock is None:
            return False
        try:
            readable, _, _ = select.select([sock], [], [], timeout)
        except (OSError, ValueError):  # closed under us by close()
            return False
        if readable:
            self.drain()
        return bool(readable)

    def interrupt(self) -> None:
        """Wake our own watcher (to stop it)."""
        own = self._own
        if own is not None:
            self._send(own)

    def close(self) -> None:
        with self._lock:
            sock, own = self._sock, self._own
            self._sock = self._own = None
        if sock is not None:
            sock.close()
        if own is not None:
            with contextlib.suppress(OSError):
                os.unlink(own)
        self._sender.close()

    # ---------------------------------------------------------------- sending
    def ring(self) -> None:
        """After a commit: one datagram to every other watcher of this database.

        Never to our own socket, whatever the listing says: a listing taken while
        :meth:`listen` was binding it (the file there, ``_own`` not yet set) holds it until
        the directory changes again, and ringing it made our own watcher wake, see a new
        ``data_version`` (our own commit) and drop the document cache after every commit."""
        own = self._own
        for path in self._peers():
            if path != own:
                self._send(path)

    def _peers(self) -> list[str]:
        try:
            mtime = os.stat(self.dir).st_mtime_ns
        except OSError:
            return []  # nobody has ever watched this database
        seen, peers, settled = self._listing
        if mtime != seen or not settled:
            now = time.time_ns()  # before listing: anything bound after it is not in it
            try:
                names = os.listdir(self.dir)
            except OSError:
                return []
            own = self._own
            peers = [
                p
                for p in (os.path.join(self.dir, n) for n in names if n.endswith(".s"))
                if p != own
            ]
            # A listing made within the timestamp granularity of the directory's last change
            # may miss a socket bound in the same tick, which leaves the mtime as it was:
            # list again at every ring until the change is older than that.
            self._listing = (mtime, peers, now - mtime > _RACY_NS)
        return peers

    def _send(self, path: str) -> None:
        try:
            self._sender.sendto(b"", path)
            self.rings += 1
        except BlockingIOError:
            pass  # its buffer is full of rings it has not read yet: it is awake
        except OSError as exc:
            if exc.errno in (errno.ECONNREFUSED, errno.ENOENT) and path != self._own:
                self._remove_stale(path)
            else:
                log.debug("ringing %s failed: %s", path, exc)

    def _remove_stale(self, path: str) -> None:
        """Nobody listens there any more (its process died): remove the socket file."""
        with contextlib.suppress(OSError):
            os.unlink(path)
            self.stale_removed += 1
        self._listing = (-1, [], False)
