"""``parse_duration``: seconds or unit strings; prose is refused."""

from __future__ import annotations

import pytest

from signoff.model import PolicyError
from signoff.policy import parse_duration


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(90, 90.0), (1.5, 1.5), ("90", 90.0), ("30s", 30.0), ("15m", 900.0), ("4h", 14400.0),
     ("1d", 86400.0), ("1h30m", 5400.0), ("0.5h", 1800.0), (" 2m ", 120.0)],
)  # fmt: skip
def test_accepted_durations(value: object, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["15 minutes", "1w", "", "-5", 0, -1, True, None, [1], "1h 30m"])
def test_refused_durations(value: object) -> None:
    with pytest.raises(PolicyError):
        parse_duration(value)


def test_error_message_names_path_and_the_value() -> None:
    with pytest.raises(PolicyError) as info:
        parse_duration("15 minutes", "signoff.yaml.defaults.timeout", line=3)
    assert str(info.value) == (
        "signoff.yaml.defaults.timeout (line 3): "
        "a duration is seconds or like 30s, 15m, 4h, 1d; got '15 minutes'"
    )
