"""`signoff policy explain --args` refuses what the gate's limits stage would: exit 2, one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_cli import config, invoke  # noqa: F401  (config is a fixture)


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ('{"amount": NaN}', "--args.amount: nan is not a number"),
        ('{"amount": Infinity}', "--args.amount: inf is not a number"),
        ('{"amount": 9007199254740993}', "--args.amount: integer outside"),
        ('{"a": ' * 40 + "1" + "}" * 40, "max_json_depth"),
    ],
)
def test_over_limit_args_exit_2_with_one_line(config: Path, args: str, why: str) -> None:  # noqa: F811
    code, output = invoke(
        "policy", "explain", "--tool", "transfer_funds", "--args", args, "--config", str(config)
    )
    assert code == 2
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and why in lines[0], output


def test_limits_from_the_config_apply(config: Path) -> None:  # noqa: F811
    config.write_text(config.read_text() + "limits: {max_args_bytes: 64}\n")
    code, output = invoke(
        "policy", "explain", "--tool", "t", "--args", '{"a": "' + "x" * 100 + '"}',
        "--config", str(config),
    )  # fmt: skip
    assert code == 2 and "max_args_bytes" in output
