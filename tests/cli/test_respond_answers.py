"""``signoff respond --answers JSON``: a form's answers keyed by question id, checked against
the choices like every other surface; ``signoff show`` prints a hostile form inertly."""

from __future__ import annotations

import importlib
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from signoff import Gate
from signoff.cli import app
from signoff.model import ApprovalRequest

POLICY = """
version: 1
store: sqlite:///signoff.db
people:
  alice: {roles: [ops]}
  erin:  {}
"""

FORM: list[dict[str, Any]] = [
    {"id": "region", "question": "Which region?", "choices": ["eu", "us"]},
    {"id": "features", "question": "Features?", "choices": ["logs", "metrics"], "multiple": True},
]

runner = CliRunner()
cli_main = importlib.import_module("signoff.cli.main")


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "signoff.yaml"
    path.write_text(textwrap.dedent(POLICY))
    monkeypatch.setattr(cli_main, "out", Console(highlight=False, soft_wrap=True, width=400))
    yield path


def ask(config: Path, **kwargs: Any) -> str:
    with Gate.from_config(config) as gate:
        req = gate.ask(wait=False, ctx=gate.make_context("erin"), **kwargs)
        assert isinstance(req, ApprovalRequest)
        return req.id


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def get(config: Path, rid: str) -> ApprovalRequest:
    with Gate.from_config(config) as gate:
        return gate._portal.run(gate.get(rid))


def test_respond_with_answers_keyed_by_question_id(config: Path) -> None:
    rid = ask(config, questions=FORM)
    answers = json.dumps({"region": "eu", "features": ["metrics"]})
    code, out = invoke("respond", rid, "--as", "alice", "--answers", answers, "-c", str(config))
    assert code == 0, out
    assert get(config, rid).calls[0].answers == {"region": "eu", "features": ["metrics"]}
    code, out = invoke("show", rid, "-c", str(config))
    assert code == 0 and 'answers: {"region": "eu", "features": ["metrics"]}' in out


@pytest.mark.parametrize(
    ("answers", "field"),
    [
        ('{"region": "mars"}', "decisions[0].answers.region"),
        ('{"region": "eu", "colour": "red"}', "decisions[0].answers.colour"),
        ('{"features": ["logs"]}', "decisions[0].answers.region"),
    ],
)
def test_a_bad_answer_names_the_field_and_stays_pending(
    config: Path, answers: str, field: str
) -> None:
    rid = ask(config, questions=FORM)
    code, out = invoke("respond", rid, "--as", "alice", "--answers", answers, "-c", str(config))
    assert code != 0 and field in out
    assert get(config, rid).pending


def test_answers_that_are_not_a_json_object_are_a_usage_error(config: Path) -> None:
    rid = ask(config, questions=FORM)
    code, out = invoke("respond", rid, "--as", "alice", "--answers", '["eu"]', "-c", str(config))
    assert code == 2 and "--answers must be a JSON object" in out


def test_the_single_question_form_still_answers_with_message(config: Path) -> None:
    rid = ask(config, question="Region?", choices=["eu", "us"])
    code, out = invoke("respond", rid, "--as", "alice", "-m", "mars", "-c", str(config))
    assert code != 0 and "decisions[0].message" in out and "not one of the choices" in out
    assert invoke("respond", rid, "--as", "alice", "-m", "us", "-c", str(config))[0] == 0
    assert get(config, rid).calls[0].message == "us"


def test_show_prints_a_hostile_form_inertly(config: Path) -> None:
    hostile = [
        {
            "id": "q1",
            "question": "Pick\x1b[2J\x1b[H one [bold]now[/bold] \u202etxt.exe",
            "choices": ["ok\x1b[8m", "[link=javascript:alert(1)]x[/link]"],
        },
    ]
    rid = ask(config, questions=hostile)
    code, out = invoke("show", rid, "-c", str(config))
    assert code == 0
    assert "\x1b" not in out and "\u202e" not in out
    assert "Pick␛[2J␛[H one [bold]now[/bold] <U+202E>txt.exe" in out
    assert "choices: ok␛[8m, [link=javascript:alert(1)]x[/link]" in out
    assert "q1" in out and "--answers" in out
