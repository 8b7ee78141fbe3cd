"""The names issue #18 fixes are contracts: imports, parameter names (by keyword too), extras."""

from __future__ import annotations

import inspect
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_openai_agents_names_and_parameters() -> None:
    from signoff.integrations.openai_agents import aresolve, resolve, signoff_tools

    assert list(inspect.signature(signoff_tools).parameters)[:2] == ["gate_or_config", "tools"]
    for fn in (resolve, aresolve):
        assert list(inspect.signature(fn).parameters)[:2] == ["result_or_state", "gate"]


def test_pydantic_ai_names_and_parameters() -> None:
    from pydantic_ai.toolsets import WrapperToolset

    from signoff.integrations.pydantic_ai import SignoffToolset, aresults, results

    assert issubclass(SignoffToolset, WrapperToolset)
    assert list(inspect.signature(SignoffToolset).parameters)[:2] == ["wrapped", "gate"]
    for fn in (results, aresults):
        assert list(inspect.signature(fn).parameters)[:2] == ["requests", "gate"]


def test_the_extras_are_named_as_the_issue_says() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert any(d.startswith("openai-agents") for d in extras["openai-agents"])
    assert any(d.startswith("pydantic-ai-slim") for d in extras["pydantic-ai"])
