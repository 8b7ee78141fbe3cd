"""new_id: the creation time in unix milliseconds (7 characters of an order-keeping base64,
42 bits: until 2109), then what ``secrets.token_urlsafe(12)`` gives for the same random
bytes."""

from __future__ import annotations

import base64
import re

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
        m.setattr(calls.secrets, "token_bytes", lambda n: raw[:n])
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
