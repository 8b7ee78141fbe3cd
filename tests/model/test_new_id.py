"""new_id: the creation time in milliseconds (12 hex digits), then what
``secrets.token_urlsafe(12)`` gives for the same random bytes."""

from __future__ import annotations

import base64
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from signoff.model import calls


@given(st.binary(min_size=12, max_size=12), st.integers(min_value=0, max_value=2**48 - 1))
def test_new_id_is_the_time_then_token_urlsafe_of_the_same_bytes(raw: bytes, ms: int) -> None:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(calls.secrets, "token_bytes", lambda n: raw[:n])
        m.setattr(calls, "_time_ns", lambda: ms * 1_000_000 + 999_999)
        made = calls.new_id("req")
    random_part = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
    assert made == f"req_{ms:012x}{random_part}"


def test_new_ids_are_url_safe_and_distinct() -> None:
    ids = {calls.new_id("call") for _ in range(1000)}
    assert len(ids) == 1000
    assert all(re.fullmatch(r"call_[0-9a-f]{12}[A-Za-z0-9_-]{16}", i) for i in ids)


def test_new_ids_sort_by_creation_time() -> None:
    """Made a millisecond or more apart, ids sort in the order they were made."""
    ticks = iter(range(1_700_000_000_000, 1_700_000_000_100))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(calls, "_time_ns", lambda: next(ticks) * 1_000_000)
        ids = [calls.new_id("req") for _ in range(100)]
    assert ids == sorted(ids)
