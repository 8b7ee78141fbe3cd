"""Whom the doorbell rings: never its own store's socket, and every waiter that bound its socket
in the same timestamp tick as the last listing (issue #15 round 5).

A writer that lists ``<database>-wake/`` while the watcher of the same store is binding its
socket (the file already there, the doorbell not yet knowing it is its own) kept that socket
in its cached listing until the directory changed again, and rang it after every commit:
the store's own watcher woke, saw ``data_version`` move (its own commit) and dropped the
whole document cache each time (seen once under load: 505 rings, 759 cache drops in one run).
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from signoff.store._sqlite_wake import Doorbell


def _rang(sock: socket.socket) -> int:
    """How many datagrams wait on ``sock`` (without blocking)."""
    n = 0
    while True:
        try:
            sock.recv(16)
        except BlockingIOError:
            return n
        n += 1


def test_a_ring_during_the_bind_of_its_own_socket_never_rings_that_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bell = Doorbell(str(tmp_path / "s.db"))
    peer = Doorbell(str(tmp_path / "s.db"))  # another process's watcher on the same file
    try:
        assert peer.listen() is not None
        real_socket = socket.socket

        class RingsWhenBound(real_socket):  # a real socket; the writer rings right after bind
            def bind(self, address: Any) -> None:
                super().bind(address)
                bell.ring()

        monkeypatch.setattr(socket, "socket", RingsWhenBound)
        own = bell.listen()
        monkeypatch.setattr(socket, "socket", real_socket)
        assert own is not None
        for _ in range(3):  # later commits: the directory has not changed since that listing
            bell.ring()
        assert _rang(own) == 0
        assert peer._sock is not None and _rang(peer._sock) == 4
    finally:
        bell.close()
        peer.close()


def test_rings_go_to_every_other_socket_and_not_its_own(tmp_path: Path) -> None:
    bell, other = Doorbell(str(tmp_path / "s.db")), Doorbell(str(tmp_path / "s.db"))
    try:
        own, theirs = bell.listen(), other.listen()
        assert own is not None and theirs is not None
        bell.ring()
        other.ring()
        assert (_rang(own), _rang(theirs)) == (1, 1)
    finally:
        bell.close()
        other.close()


def test_a_waiter_bound_in_the_same_timestamp_tick_as_the_last_listing_is_still_rung(
    tmp_path: Path,
) -> None:
    """Directory mtimes are coarse on many systems (a jiffy before Linux 6.13, 1-2 s on some
    filesystems): a socket bound in the tick of the listing leaves the mtime as it was. The
    listing was keyed on that mtime, so the new waiter was never rung (it woke only by its
    1 s safety look). Here the mtime is put back by hand, as such a clock leaves it."""
    db = str(tmp_path / "s.db")
    bell, first, late = Doorbell(db), Doorbell(db), Doorbell(db)
    try:
        assert first.listen() is not None
        bell.ring()  # lists the directory: one peer
        listed = os.stat(bell.dir)
        sock = late.listen()
        assert sock is not None
        os.utime(bell.dir, ns=(listed.st_atime_ns, listed.st_mtime_ns))  # the same tick
        bell.ring()
        assert _rang(sock) == 1
    finally:
        for d in (bell, first, late):
            d.close()


def test_a_listing_is_not_redone_at_every_ring_once_the_directory_is_old(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    bell, peer = Doorbell(db), Doorbell(db)
    try:
        assert peer.listen() is not None
        old = time.time_ns() - 60 * 10**9
        os.utime(bell.dir, ns=(old, old))
        bell.ring()
        late = Doorbell(db)
        try:
            assert late.listen() is not None
            os.utime(bell.dir, ns=(old, old))  # a change the mtime cannot show
            bell.ring()  # an old mtime's listing is trusted (the cost side: no listdir per ring)
            assert late._sock is not None and _rang(late._sock) == 0
        finally:
            late.close()
    finally:
        bell.close()
        peer.close()
