"""The doorbell never rings its own store's socket (issue #15 round 5).

A writer that lists ``<database>-wake/`` while the watcher of the same store is binding its
socket (the file already there, the doorbell not yet knowing it is its own) kept that socket
in its cached listing until the directory changed again, and rang it after every commit:
the store's own watcher woke, saw ``data_version`` move (its own commit) and dropped the
whole document cache each time (seen once under load: 505 rings, 759 cache drops in one run).
"""

from __future__ import annotations

import socket
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
