"""The SQLite store's write-through document cache: request id -> (row version, JSON text).

Why: every ``update_request`` used to read its row (a SELECT) before changing it, and every
``get_request`` took a hop to the reader thread for a SELECT. The documents this process
wrote are already in memory as the JSON text it just stored; keeping that text saves the
statement and the hop. The entry is the *text*, an immutable ``str``, and next to it the
parsed request: the snapshot the writer wrote (when its text certainly parses back:
:func:`reads_back`), or the first parse of a cached read. Cached
reads hand out that snapshot itself, shared and read-only, exactly as the MemoryStore hands
out its snapshots (copy on write: ``copy_for_update()`` gives a request of one's own); the
writer's ``mutate`` works on a private copy of it. The snapshot lives and dies with its
text: every rule below that drops or replaces the text drops or replaces the snapshot.

When an entry may be used (the rules that keep it exact):

* **Writes** (on the writer thread, inside ``BEGIN IMMEDIATE``): the group's first statement
  after ``BEGIN`` reads ``PRAGMA data_version`` on the writer's connection
  (:meth:`DocCache.check`). It changes exactly when *another* connection — another process,
  another store on the same file, the ``sqlite3`` shell — has committed, and then the whole
  cache is dropped. While the group holds the write lock nobody else can commit, so a cached
  entry is the row as the transaction sees it. The UPDATE is still conditional on the
  version the change started from; a miss there (which the check makes impossible short of
  a bug) drops the entry and the change is made again from the row.
* An entry is taken out (:meth:`DocCache.take`) when a job starts changing it, and put back
  only by an after-commit callback of that job (:meth:`DocCache.put`): a job whose
  savepoint or group rolls back leaves no entry, and a second job on the same request in
  the same group reads the row the first one wrote.
* **Reads** on the event loop (:meth:`DocCache.read`) only while ``trusted`` — the store's
  watcher is running with a working doorbell and has dropped the cache at its first look; it
  drops it again on every ring and ``data_version`` change it sees — **and** while a *probe*
  (a read-only connection of the store) reads the same ``PRAGMA data_version`` as right after
  this store's last COMMIT (:meth:`DocCache.synced`, on the writer before any entry of that
  group is put): any commit since, by anyone, makes it differ and the read goes to the
  database. A ``generation`` counter, bumped by every drop, keeps a put computed before a
  drop from landing after it. What a cached read can miss: a commit by another connection
  that lands between this store's COMMIT and its probe read a few statements later *and*
  does not ring (the ``sqlite3`` shell); its ring, or this store's next write, drops it.

Bounded: least recently used entries beyond ``capacity`` are dropped, and expired or
cancelled requests are not kept (nothing changes them any more).
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from typing import NamedTuple

from signoff.model import ApprovalRequest

DEFAULT_CAPACITY = 4096
# pydantic's JSON parser refuses documents nested ~200 deep (such a row is quarantined when
# read); a text with at most this many ``{`` and ``[`` in all cannot be nested that deep
_SHAREABLE_BRACKETS = 128
_FINISHED = frozenset({"expired", "cancelled"})


class Cached(NamedTuple):
    version: int  # the row's version column
    doc: str  # the row's doc column, as written
    # ``doc`` parsed: a shared read-only snapshot (None until the writer or a read has one)
    request: ApprovalRequest | None = None


def reads_back(doc: str) -> bool:
    """True when ``doc``, dumped from a valid request, certainly parses back: the writer may
    share the request it dumped as the snapshot of that text (~1 µs for 1.4 kB). False
    leaves the snapshot to a read's parse, which quarantines a text that does not parse."""
    return doc.count("{") + doc.count("[") <= _SHAREABLE_BRACKETS


class DocCache:
    """Thread-safe: the writer thread puts and takes, event loops read, the watcher drops."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[str, Cached] = OrderedDict()
        self._lock = threading.Lock()
        self._data_version: int | None = None  # of the writer's connection, last group
        self.generation = 0
        self.trusted = False  # event-loop reads allowed (see the module docstring)
        # the probe connection's data_version right after this store's last COMMIT
        self._probe_expect: int | None = None
        self.hits = 0
        self.misses = 0
        self.drops = 0

    def __len__(self) -> int:
        return len(self._entries)

    def check(self, conn: sqlite3.Connection) -> bool:
        """Right after ``BEGIN IMMEDIATE`` on the writer: drop everything if another
        connection committed since the last group. True when none did (what this
        connection knows of the file is still all there is)."""
        try:
            version: int | None = int(conn.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.Error:  # cannot tell: trust nothing (and compare to nothing next time)
            version = None
        if version is None or version != self._data_version:
            self.drop_all()
            self._data_version = version
            return False
        return True

    def drop_all(self) -> None:
        with self._lock:
            self.generation += 1
            if self._entries:
                self._entries.clear()
                self.drops += 1

    def distrust(self) -> None:
        """Reads go to the database until :meth:`trust` again (the watcher stopped)."""
        with self._lock:
            self.trusted = False

    def trust(self) -> None:
        """From the watcher, after its first look dropped the cache: reads may use it."""
        with self._lock:
            self.generation += 1
            if self._entries:
                self._entries.clear()
                self.drops += 1
            self.trusted = True

    def peek(self, request_id: str) -> Cached | None:
        """The entry as it is now, for a caller about to queue a change (the writer will
        use what it parsed only if :meth:`take` then returns this very entry)."""
        return self._entries.get(request_id)

    def take(self, request_id: str) -> Cached | None:
        """On the writer, inside the transaction: the entry, removed until its job commits."""
        with self._lock:
            entry = self._entries.pop(request_id, None)
        if entry is None:
            self.misses += 1
        else:
            self.hits += 1
        return entry

    def discard(self, request_id: str) -> None:
        with self._lock:
            self._entries.pop(request_id, None)

    def put(self, request_id: str, status: str, entry: Cached, generation: int) -> None:
        """After the commit that wrote ``entry``; ignored if the cache was dropped since the
        job computed it (``generation``), or the request is finished."""
        with self._lock:
            if generation != self.generation:
                return
            if status in _FINISHED:
                self._entries.pop(request_id, None)
                return
            self._entries[request_id] = entry
            self._entries.move_to_end(request_id)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)

    def synced(self, probe_version: int | None) -> None:
        """On the writer, right after a COMMIT (before its jobs put their entries): the probe
        connection's ``data_version`` now. Reads check it has not moved since."""
        with self._lock:
            self._probe_expect = probe_version

    def read(self, request_id: str, probe_version: int | None) -> Cached | None:
        """On an event loop: the cached entry, if reads may use the cache and it has one.
        ``probe_version``: the probe connection's ``data_version`` just read; any commit since
        this store's last one (by anyone) makes it differ, and the read goes to the database."""
        with self._lock:
            if not self.trusted or probe_version is None:
                return None
            if probe_version != self._probe_expect:
                return None
            entry = self._entries.get(request_id)
            if entry is not None:
                self._entries.move_to_end(request_id)
        return entry

    def remember(self, request_id: str, entry: Cached, request: ApprovalRequest) -> None:
        """After a read parsed ``entry``'s text: keep the parse as its snapshot, if the entry
        is still the one cached (not taken, replaced or dropped meanwhile)."""
        with self._lock:
            if self._entries.get(request_id) is entry:
                self._entries[request_id] = entry._replace(request=request)
