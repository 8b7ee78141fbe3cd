"""The judges: section: every mistake is a PolicyError naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from signoff.judges.settings import (
    LangChainJudgeSettings,
    OpenAIJudgeSettings,
    PythonJudgeSettings,
    build_judges,
    check_sections,
    parse,
)
from signoff.model import PolicyError

OPENAI: dict[str, Any] = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
PYTHON: dict[str, Any] = {
    "kind": "python",
    "function": "tests.judges.sample_functions:keyword_judge",
}


def error_for(section: Any) -> PolicyError:
    with pytest.raises(PolicyError) as caught:
        check_sections({"judges": section}, filename="signoff.yaml")
    return caught.value


def test_defaults() -> None:
    fast = parse({"fast": OPENAI})["fast"]
    assert isinstance(fast, OpenAIJudgeSettings)
    assert (fast.timeout, fast.cache_ttl, fast.temperature) == (10.0, 600.0, 0.0)
    assert (fast.timeout_s, fast.cache_ttl_s) == (10.0, 600.0)
    assert fast.api_key is None and fast.prompt is None


def test_every_kind_parses() -> None:
    parsed = parse(
        {
            "fast": {**OPENAI, "timeout": "5s", "cache_ttl": "1h", "temperature": 0.2},
            "local": PYTHON,
            "chat": {"kind": "langchain", "model": "myorg.models:judge"},
        }
    )
    assert isinstance(parsed["fast"], OpenAIJudgeSettings)
    assert (parsed["fast"].timeout, parsed["fast"].cache_ttl) == (5.0, 3600.0)
    assert isinstance(parsed["local"], PythonJudgeSettings)
    assert isinstance(parsed["chat"], LangChainJudgeSettings)


def test_settings_are_frozen() -> None:
    fast = parse({"fast": OPENAI})["fast"]
    with pytest.raises(ValueError, match="frozen"):
        fast.timeout = 1.0  # type: ignore[misc]


def test_no_section_is_no_judges() -> None:
    assert parse(None) == {}
    check_sections({}, filename="signoff.yaml")
    assert build_judges(None) == {}


@pytest.mark.parametrize(
    ("entry", "path", "message"),
    [
        ({"base_url": "http://x", "model": "m"}, "judges.fast.kind", "kind is missing"),
        ({**OPENAI, "kind": "anthropic"}, "judges.fast.kind", "expected one of openai"),
        ({"kind": "openai", "model": "m"}, "judges.fast.base_url", "Field required"),
        ({**OPENAI, "base_url": "ftp://x"}, "judges.fast.base_url", "http://"),
        ({**OPENAI, "api_key": "sk-inline"}, "judges.fast.api_key", "never inline"),
        ({**OPENAI, "model": ""}, "judges.fast.model", "at least 1"),
        ({"kind": "openai", "base_url": "http://x"}, "judges.fast.model", "Field required"),
        ({**OPENAI, "temperature": 3}, "judges.fast.temperature", "less than or equal to 2"),
        ({**OPENAI, "timeout": "5 minutes"}, "judges.fast.timeout", "a duration is"),
        ({**OPENAI, "timeout": 0}, "judges.fast.timeout", "a duration is"),
        ({**OPENAI, "cache_ttl": "soon"}, "judges.fast.cache_ttl", "a duration is"),
        ({**OPENAI, "prompt": ""}, "judges.fast.prompt", "at least 1"),
        ({**OPENAI, "on_mismatch": "deny"}, "judges.fast.on_mismatch", "Extra inputs"),
        ({**OPENAI, "function": "a:b"}, "judges.fast.function", "Extra inputs"),
        ({"kind": "python"}, "judges.fast.function", "Field required"),
        ({"kind": "python", "function": "a:b", "prompt": "p"}, "judges.fast.prompt", "Extra"),
        ({"kind": "python", "function": "nocolon"}, "judges.fast.function", "module:attribute"),
        ({"kind": "python", "function": "a:b", "model": "m"}, "judges.fast.model", "Extra"),
        ({"kind": "langchain", "model": "a:b:c"}, "judges.fast.model", "module:attribute"),
        ({"kind": "langchain", "model": "a:b", "base_url": "http://x"}, "judges.fast.base_url", ""),
        ("openai", "judges.fast", "a judge is a mapping"),
    ],
)
def test_bad_entry_is_a_policy_error_naming_the_key(entry: Any, path: str, message: str) -> None:
    err = error_for({"fast": entry})
    assert err.path == path
    assert message in err.message
    assert err.file == "signoff.yaml"


def test_section_that_is_not_a_mapping_is_an_error() -> None:
    assert error_for(["fast"]).path == "judges"


def test_bad_judge_name_is_an_error() -> None:
    assert "a judge's name" in error_for({"bad name": OPENAI}).message


def test_env_references_in_base_url_and_model_are_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T_JUDGE_BASE", "http://127.0.0.1:9")
    monkeypatch.setenv("T_JUDGE_MODEL", "llama3")
    fast = parse(
        {"fast": {**OPENAI, "base_url": "${T_JUDGE_BASE}/v1/", "model": "${T_JUDGE_MODEL}"}}
    )
    assert isinstance(fast["fast"], OpenAIJudgeSettings)
    assert fast["fast"].base_url == "http://127.0.0.1:9/v1"
    assert fast["fast"].model == "llama3"


def test_unset_env_in_base_url_names_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("T_JUDGE_UNSET", raising=False)
    err = error_for({"fast": {**OPENAI, "base_url": "${T_JUDGE_UNSET}"}})
    assert err.path == "judges.fast.base_url"
    assert err.message.startswith("environment variable T_JUDGE_UNSET is not set")


def test_api_key_is_kept_as_a_reference_and_read_when_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv("T_JUDGE_KEY", "sk-from-env")
    fast = parse({"fast": {**OPENAI, "api_key": "${T_JUDGE_KEY}"}})["fast"]
    assert isinstance(fast, OpenAIJudgeSettings)
    assert fast.api_key == "T_JUDGE_KEY"
    assert "sk-from-env" not in repr(fast)
    judge = build_judges({"fast": fast})["fast"]
    assert judge._api_key == "sk-from-env"  # type: ignore[attr-defined]


def test_unset_api_key_env_is_an_environment_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("T_JUDGE_KEY_UNSET", raising=False)
    err = error_for({"fast": {**OPENAI, "api_key": "${T_JUDGE_KEY_UNSET}"}})
    assert err.path == "judges.fast.api_key"
    # signoff policy check turns this into a warning (the key may live only on the server)
    assert err.message.startswith("environment variable T_JUDGE_KEY_UNSET is not set")
    with pytest.raises(PolicyError, match="T_JUDGE_KEY_UNSET"):
        build_judges({"fast": {**OPENAI, "api_key": "${T_JUDGE_KEY_UNSET}"}})


def test_check_sections_does_not_import_the_function() -> None:
    check_sections(
        {"judges": {"local": {"kind": "python", "function": "no_such_module_xyz:judge"}}},
        filename="signoff.yaml",
    )


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("no_such_module_xyz:judge", "cannot import no_such_module_xyz"),
        ("tests.judges.sample_functions:missing", "has no attribute missing"),
        ("tests.judges.sample_functions:NOT_A_FUNCTION", "is not a function"),
    ],
)
def test_unresolvable_python_function_fails_when_built(ref: str, message: str) -> None:
    with pytest.raises(PolicyError) as caught:
        build_judges({"local": {"kind": "python", "function": ref}})
    assert caught.value.path == "judges.local.function"
    assert message in caught.value.message


def test_langchain_reference_that_is_not_a_model_fails_when_built() -> None:
    pytest.importorskip("langchain_core")
    with pytest.raises(PolicyError) as caught:
        build_judges(
            {"chat": {"kind": "langchain", "model": "tests.judges.sample_functions:NOT_A_FUNCTION"}}
        )
    assert caught.value.path == "judges.chat.model"


def test_built_judges_carry_name_identity_and_cache_ttl() -> None:
    judges = build_judges({"local": {**PYTHON, "cache_ttl": "2m", "timeout": "3s"}})
    local = judges["local"]
    assert local.name == "local"
    assert local.cache_ttl_s == 120.0  # type: ignore[attr-defined]
    assert local.timeout_s == 3.0  # type: ignore[attr-defined]


def test_the_documented_example_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    monkeypatch.setenv("JUDGE_BASE_URL", "https://api.example.com/v1")
    monkeypatch.setenv("JUDGE_API_KEY", "sk-example")
    section = yaml.safe_load(
        """
        judges:
          fast:
            kind: openai
            base_url: ${JUDGE_BASE_URL}
            api_key: ${JUDGE_API_KEY}
            model: gpt-4.1-mini
            timeout: 5s
          local:
            kind: python
            function: myorg.judges:keyword_judge
        """
    )
    check_sections(section, filename="signoff.yaml")
    parsed = parse(section["judges"])
    assert isinstance(parsed["fast"], OpenAIJudgeSettings)
    assert parsed["fast"].base_url == "https://api.example.com/v1"
    assert parsed["fast"].timeout == 5.0
