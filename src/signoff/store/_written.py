"""The last version of each request this process wrote, so the next update can skip its read.

An update is read → ``mutate`` → conditional write (``… WHERE version = read version``). When
this process wrote the row last, the read returns what it wrote: the store keeps that document
here (keyed by id, with its version) and runs ``mutate`` on a working copy of it
(``store/_working.py``), then the same conditional write. What is kept is a read-only
snapshot — the very request the update returned and woke waiters with, as the other stores
hand out theirs (``Store.update_request``): nothing copies it whole, and nothing changes it.
If anything else wrote the row since (another replica, the CLI, a sweeper), the version no
longer matches, nothing is written, and the store falls back to the read path — so a stale
entry costs one wasted statement, never a wrong write. Only a *changed* transition whose
write matched is trusted: a mutation that refuses or changes nothing on the cached copy is
run again on the row as stored, since a newer row may allow it.

Only documents known to read back are remembered: a new request is parsed from the very JSON
text that was inserted (what a read would parse), and kept only if that succeeds; a later
version is the state machine's change of such a document. A document the store cannot read
back (say, nested too deep for the parser) is never taken on trust: the next update reads
the row, which quarantines it, rather than writing over it.

Bounded (least recently used go first); used from any event loop or thread (a lock).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from signoff.model import ApprovalRequest


class WrittenDocs:
    def __init__(self, capacity: int = 4096) -> None:
        self._docs: OrderedDict[str, ApprovalRequest] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._docs)

    def keep(self, request: ApprovalRequest) -> None:
        """Remember ``request`` as stored now (a read-only snapshot: kept as it is)."""
        with self._lock:
            self._docs[request.id] = request
            self._docs.move_to_end(request.id)
            while len(self._docs) > self._capacity:
                self._docs.popitem(last=False)

    def take(self, request_id: str) -> ApprovalRequest | None:
        """The remembered snapshot, removed (the caller changes a working copy of it and
        keeps what it then writes with :meth:`keep`)."""
        with self._lock:
            return self._docs.pop(request_id, None)

    def forget(self, request_id: str) -> None:
        with self._lock:
            self._docs.pop(request_id, None)
