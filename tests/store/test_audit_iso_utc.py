"""``iso_utc`` (the fixed-width text every audit row's ``at`` is hashed with) and
``canonical_json`` (the text every row's hash is taken of)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from signoff.store.audit import _canonical_data, canonical_json, iso_utc, json_native


@given(st.datetimes(timezones=st.just(UTC)))
def test_utc_time_is_isoformat_with_microseconds_and_z(moment: datetime) -> None:
    assert iso_utc(moment) == moment.isoformat(timespec="microseconds")[:-6] + "Z"


@given(st.datetimes(timezones=st.just(UTC)))
def test_utc_time_reads_back_as_itself(moment: datetime) -> None:
    assert datetime.fromisoformat(iso_utc(moment)) == moment


def test_naive_and_other_zones_are_converted_to_the_same_text() -> None:
    moment = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert iso_utc(moment) == "2026-01-02T03:04:05.000000Z"
    assert iso_utc(moment.replace(tzinfo=None)) == "2026-01-02T03:04:05.000000Z"
    plus_two = moment.astimezone(timezone(timedelta(hours=2)))
    assert iso_utc(plus_two) == "2026-01-02T03:04:05.000000Z"


def test_years_before_1000_keep_four_digits() -> None:
    assert iso_utc(datetime(7, 1, 1, tzinfo=UTC)) == "0007-01-01T00:00:00.000000Z"


# canonical_json calls json's C encoder directly: the same text as json.dumps with the
# canonical options, and the same refusal of a circular value
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_JSON)
def test_canonical_json_is_json_dumps_with_the_canonical_options(value: object) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert canonical_json(value) == expected


def test_canonical_json_writes_datetimes_as_iso_utc_and_refuses_a_circular_value() -> None:
    moment = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    assert canonical_json({"b": moment, "a": 1}) == '{"a":1,"b":"2026-01-02T03:04:05.000006Z"}'
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        canonical_json(loop)


@given(st.dictionaries(st.text(), _JSON, max_size=5))
def test_plain_event_data_is_encoded_as_its_stored_form(data: dict[str, object]) -> None:
    # the prebuilt encoder for plain data gives the text of the JSON-native round trip
    assert _canonical_data(data) == (canonical_json(json_native(data)) if data else "{}")


def test_plain_data_sharing_one_list_twice_is_encoded_twice() -> None:
    shared = [1, "x"]
    assert _canonical_data({"b": shared, "a": shared}) == '{"a":[1,"x"],"b":[1,"x"]}'
