"""new_id: the creation time in unix milliseconds (7 characters of an order-keeping base64,
42 bits: until 2109), then what ``secrets.token_urlsafe(12)`` gives for the same random
bytes — cut from one ``os.urandom`` read per 256 ids, each part handed out once, none shared
with a forked child."""

from __future__ import annotations

import base64
import os
import re
import threading
from collections import deque

import pytest
from hypothesis import given
from hypothesis import strategies as st

from signoff.model import calls

ORDERED = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"


def stamp_of(ms: int) -> str:
    """The 7 time characters, spelled out digit by digit (6 bits each, most significant first)."""
    return "".join(ORDERED[(ms >> shift) & 63] for shift in range(36, -1, -6))


def test_the_order_keeping_alphabet_is_in_ascii_order() -> None:
    assert list(ORDERED) == sorted(ORDERED) and len(set(ORDERED)) == 64


@given(st.binary(min_size=12, max_size=12), st.integers(min_value=0, max_value=2**42 - 1))
def test_new_id_is_the_time_then_token_urlsafe_of_the_same_bytes(raw: bytes, ms: int) -> None:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(calls, "_random_parts", deque())  # the next id reads a new block
        m.setattr(calls.os, "urandom", lambda n: raw * (n // 12))
        m.setattr(calls, "_time_ns", lambda: ms * 1_000_000 + 999_999)
        made = calls.new_id("req")
    random_part = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
    assert made == f"req_{stamp_of(ms)}{random_part}"


@given(st.lists(st.integers(min_value=0, max_value=2**42 - 1), min_size=2, max_size=50))
def test_new_ids_sort_by_creation_time(times: list[int]) -> None:
    """Made in different milliseconds, ids sort as their times do."""
    ticks = iter(times)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(calls, "_time_ns", lambda: next(ticks) * 1_000_000)
        ids = [calls.new_id("req") for _ in times]
    distinct = {ms: made for ms, made in zip(times, ids, strict=True)}
    assert [distinct[ms] for ms in sorted(distinct)] == sorted(distinct.values())


def test_new_ids_are_url_safe_and_distinct() -> None:
    ids = {calls.new_id("call") for _ in range(1000)}
    assert len(ids) == 1000
    assert all(re.fullmatch(r"call_[A-Za-z0-9_-]{23}", i) for i in ids)


def test_a_request_id_fits_every_telegram_button() -> None:
    """Telegram's callback_data holds 64 bytes: the sealed action and request id of a
    button for the last of the most choices an inquiry may have still fit."""
    from signoff.channels.telegram import CALLBACK_DATA_MAX, seal
    from signoff.model.inquiries import MAX_CHOICES

    for action in ("a", "r", f"c{MAX_CHOICES - 1}"):
        assert len(seal("secret", action, calls.new_id("req"))) <= CALLBACK_DATA_MAX


def test_ids_of_one_millisecond_share_its_stamp_and_the_next_one_gets_its_own() -> None:
    """The stamp is kept for the millisecond it was made in (one tuple, replaced whole)."""
    ticks = iter([5_000, 5_000, 5_001, 5_000])
    with pytest.MonkeyPatch.context() as m:
        m.setattr(calls, "_time_ns", lambda: next(ticks) * 1_000_000 + 123)
        made = [calls.new_id("req") for _ in range(4)]
    assert [i[4:11] for i in made] == [stamp_of(5_000)] * 2 + [stamp_of(5_001), stamp_of(5_000)]
    assert len(set(made)) == 4


def test_random_parts_are_handed_out_once_across_threads() -> None:
    """Threads drawing ids at once, across many refills, never get the same random part."""
    made: list[list[str]] = [[] for _ in range(8)]
    start = threading.Barrier(8)

    def draw(out: list[str]) -> None:
        start.wait()
        out.extend(calls.new_id("req")[11:] for _ in range(3000))

    threads = [threading.Thread(target=draw, args=(out,)) for out in made]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    parts = [part for out in made for part in out]
    assert len(parts) == 24_000 and len(set(parts)) == 24_000


def test_a_forked_child_does_not_repeat_its_parents_ids() -> None:
    calls.new_id("req")  # the parent holds a block of parts
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next id, to the parent
        try:
            os.write(write, calls.new_id("req")[11:].encode("ascii"))
        finally:
            os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode("ascii")
    os.close(read)
    os.waitpid(pid, 0)
    parent = [calls.new_id("req")[11:] for _ in range(300)]  # past the parent's whole block
    assert len(child) == 16 and child not in parent
