"""new_id gives what ``secrets.token_urlsafe(12)`` gives for the same random bytes."""

from __future__ import annotations

import base64
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from signoff.model import calls


@given(st.binary(min_size=12, max_size=12))
def test_new_id_is_token_urlsafe_of_the_same_bytes(raw: bytes) -> None:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(calls.secrets, "token_bytes", lambda n: raw[:n])
        made = calls.new_id("req")
    assert made == "req_" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def test_new_ids_are_url_safe_and_distinct() -> None:
    ids = {calls.new_id("call") for _ in range(1000)}
    assert len(ids) == 1000
    assert all(re.fullmatch(r"call_[A-Za-z0-9_-]{16}", i) for i in ids)
