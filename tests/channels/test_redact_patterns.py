"""``ui.redact_keys`` patterns run on RE2: agent-chosen key names cannot stall a message."""

from __future__ import annotations

import json
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from signoff.channels.redact import REDACTED, Redactor
from signoff.cli import app
from signoff.model import PolicyError
from signoff.policy.regex import RegexError

MAX_ARGS_BYTES = 262_144


def redacted_in_thread(redactor: Redactor, value: Any, watchdog_s: float = 120.0) -> Any:
    """``redactor.value(value)``; a hang guard (never a timing assertion) around it."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(redactor.value(value)), daemon=True)
    thread.start()
    thread.join(watchdog_s)
    assert out, "redaction never returned: catastrophic backtracking"
    return out[0]


def test_redos_key_pattern_on_a_256_kib_key_name_is_answered() -> None:
    redactor = Redactor(["(a+)+$", "(x|xx)+y"])
    crafted = "a" * (MAX_ARGS_BYTES - 1) + "!"
    shown = redacted_in_thread(redactor, {crafted: "v", "aaaa": "secret", "x" * 5000: "w"})
    assert shown == {crafted: "v", "aaaa": REDACTED, "x" * 5000: "w"}


def test_default_keys_stay_case_insensitive_searches() -> None:
    shown = Redactor().value({"API_KEY": 1, "db_Password": 2, "user": 3, "Cookie": 4})
    assert shown == {"API_KEY": REDACTED, "db_Password": REDACTED, "user": 3, "Cookie": REDACTED}


def test_bad_redact_key_names_the_pattern_and_the_fix() -> None:
    with pytest.raises(RegexError) as info:
        Redactor(["token", "(?<=x)key"])
    message = str(info.value)
    assert "bad regular expression '(?<=x)key'" in message
    assert "no lookahead or lookbehind" in message


def test_server_settings_report_the_bad_redact_key_by_position() -> None:
    from signoff.server.settings import ServerSettings

    with pytest.raises(PolicyError) as info:
        ServerSettings.from_sections({"ui": {"redact_keys": ["token", "(a)\\1"]}})
    err = info.value
    assert err.path == "signoff.yaml.ui.redact_keys"
    assert "[1] bad regular expression '(a)\\1'" in err.message
    assert "no backreferences" in err.message


def test_policy_check_fails_on_a_bad_redact_key(tmp_path: Path) -> None:
    path = tmp_path / "signoff.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            version: 1
            tools: {}
            ui:
              redact_keys: ["secret", "(unclosed"]
            """
        )
    )
    result = CliRunner().invoke(app, ["policy", "check", "--config", str(path), "--json"])
    assert result.exit_code == 2, result.output
    [error] = json.loads(result.output)["errors"]
    assert "ui.redact_keys" in error and "'(unclosed'" in error and "missing )" in error
