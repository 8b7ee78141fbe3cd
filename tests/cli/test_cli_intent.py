"""``signoff policy explain`` runs the intent judge (``--no-judge``, ``--user-request``);
``signoff policy test`` cases stub its answer."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from typer.testing import CliRunner

from signoff.cli import app
from tests.gate import intent_judges

POLICY = """
version: 1
store: memory://
judges:
  rules: {kind: python, function: "tests.gate.intent_judges:scripted"}
tools:
  drop_table:
    default: allow
    intent: {judge: rules, on_mismatch: deny}
"""


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def policy(tmp_path: Path) -> Path:
    path = tmp_path / "signoff.yaml"
    path.write_text(textwrap.dedent(POLICY), encoding="utf-8")
    return path


def test_explain_asks_the_judge_and_shows_its_answer_as_model_output(tmp_path: Path) -> None:
    intent_judges.asked.clear()
    intent_judges.answers["show users"] = {"verdict": "mismatch", "reason": "it drops"}
    config = str(policy(tmp_path))
    base = ("policy", "explain", "--config", config, "--tool", "drop_table")
    code, output = invoke(*base, "--user-request", "show users", "--json")
    assert code == 0, output
    verdict = json.loads(output)["verdict"]
    assert verdict["verdict"] == "deny" and verdict["rule"] == "drop_table.default.intent"
    assert verdict["intent"]["verdict"] == "mismatch"
    assert intent_judges.asked[-1].user_request == "show users"
    code, output = invoke(*base, "--user-request", "show users")
    assert "intent check by judge rules (model output)" in output
    code, output = invoke(*base, "--user-request", "show users", "--no-judge", "--json")
    assert json.loads(output)["verdict"]["verdict"] == "allow"
    assert len(intent_judges.asked) == 2  # --no-judge asked nobody


def test_policy_test_cases_stub_the_judge(tmp_path: Path) -> None:
    config = str(policy(tmp_path))
    cases = tmp_path / "cases.yaml"
    cases.write_text(
        textwrap.dedent(
            """
            cases:
              - name: a mismatch denies
                tool: drop_table
                judge: {verdict: mismatch, reason: reads only}
                expect: {verdict: deny, rule: drop_table.default.intent}
              - name: consistent keeps the allow
                tool: drop_table
                judge: {verdict: consistent}
                expect: {verdict: allow}
              - name: without a stub, the policy's own verdict
                tool: drop_table
                expect: {verdict: allow}
            """
        ),
        encoding="utf-8",
    )
    code, output = invoke("policy", "test", str(cases), "--config", config)
    assert code == 0, output
    cases.write_text(
        "cases:\n  - {tool: drop_table, judge: {verdict: maybe}, expect: {verdict: allow}}\n",
        encoding="utf-8",
    )
    code, output = invoke("policy", "test", str(cases), "--config", config)
    assert code == 2 and "judge is {verdict: one of" in output
