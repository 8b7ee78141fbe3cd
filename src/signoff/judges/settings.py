"""The ``judges:`` section of ``signoff.yaml``: named judges, validated, then built.

```yaml
judges:
  fast:
    kind: openai                 # any OpenAI-compatible /chat/completions endpoint
    base_url: ${JUDGE_BASE_URL}  # ${ENV} expanded at load
    api_key: ${JUDGE_API_KEY}    # a ${ENV} reference only (optional for local servers)
    model: gpt-4.1-mini
    timeout: 5s                  # default 10s
    cache_ttl: 10m               # default 10m
  local:
    kind: python
    function: myorg.judges:keyword_judge
  chat:
    kind: langchain
    model: myorg.models:judge_model   # a BaseChatModel, or a zero-argument callable giving one
    prompt: "..."                # openai and langchain: replaces our system prompt
    inquiry_prompt: "..."        # the same for answering inquiries (inquiry-v1)
```

Every mistake is a :class:`PolicyError` naming the key (``judges.fast.timeout``). The
referenced code (``function``, ``model``) and the ``openai`` package are only loaded by
:func:`build_judges`, so ``signoff policy check`` never imports user code.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationError

from signoff.judges.base import Judge
from signoff.model import PolicyError
from signoff.policy.settings import Duration, HttpUrl, SettingsSection, expand_env

JudgeKind = Literal["openai", "python", "langchain"]
KINDS: tuple[str, ...] = ("openai", "python", "langchain")

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
_OBJECT_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_EXPANDED = ("base_url", "model")  # ${ENV} allowed; api_key stays a reference


def _env_name(value: object) -> object:
    if not isinstance(value, str):
        return value
    match = _ENV_REF.match(value.strip())
    if not match:
        raise ValueError(
            "secrets are written as a ${ENV_VAR} reference, never inline; "
            "put the key in an environment variable and write e.g. ${JUDGE_API_KEY}"
        )
    return match.group(1)


def _object_ref(value: object) -> object:
    if isinstance(value, str) and not _OBJECT_REF.match(value.strip()):
        raise ValueError(f"expected 'module:attribute' (like myorg.judges:check), got {value!r}")
    return value.strip() if isinstance(value, str) else value


EnvName = Annotated[str, BeforeValidator(_env_name)]
ObjectRef = Annotated[str, BeforeValidator(_object_ref)]


class _JudgeSettings(SettingsSection):
    """Keys every kind has."""

    timeout: Duration = Field(default=10.0, gt=0)
    cache_ttl: Duration = Field(default=600.0, gt=0)

    @property
    def timeout_s(self) -> float:
        return self.timeout

    @property
    def cache_ttl_s(self) -> float:
        return self.cache_ttl


class _ModelJudgeSettings(_JudgeSettings):
    """Keys of the judges that are models (a function has no prompt)."""

    #: Replaces our system prompt (the data blocks and their escaping stay ours).
    prompt: str | None = Field(default=None, min_length=1)
    #: Replaces our system prompt for answering inquiries (``inquiries.fallback``/``suggest``;
    #: ``inquiry-v1``); the question's data blocks, escaping and answer schema stay ours.
    inquiry_prompt: str | None = Field(default=None, min_length=1)


class OpenAIJudgeSettings(_ModelJudgeSettings):
    """``kind: openai`` — an OpenAI-compatible chat-completions endpoint."""

    kind: Literal["openai"]
    base_url: HttpUrl
    #: The environment variable holding the key (read when the judge is built).
    api_key: EnvName | None = None
    model: str = Field(min_length=1)
    temperature: float = Field(default=0.0, ge=0, le=2)


class PythonJudgeSettings(_JudgeSettings):
    """``kind: python`` — ``module:function``, sync or async."""

    kind: Literal["python"]
    function: ObjectRef
    #: Answers inquiries (``inquiries.fallback`` / ``suggest``): ``(inquiry, ctx) -> answer``;
    #: ``function`` when not given.
    inquiry_function: ObjectRef | None = None


class LangChainJudgeSettings(_ModelJudgeSettings):
    """``kind: langchain`` — ``module:attr`` giving a ``BaseChatModel`` (or a factory)."""

    kind: Literal["langchain"]
    model: ObjectRef


JudgeSettings = OpenAIJudgeSettings | PythonJudgeSettings | LangChainJudgeSettings

_MODELS: dict[str, type[_JudgeSettings]] = {
    "openai": OpenAIJudgeSettings,
    "python": PythonJudgeSettings,
    "langchain": LangChainJudgeSettings,
}


def parse(section: object, *, filename: str = "signoff.yaml") -> dict[str, JudgeSettings]:
    """The ``judges:`` mapping validated, name → settings; PolicyError naming the key."""
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise PolicyError(
            "judges is a mapping of names to judges, like {fast: {kind: openai, ...}}",
            path="judges",
            file=filename,
        )
    return {
        _name(name, filename): parse_entry(name, entry, filename=filename)
        for name, entry in section.items()
    }


def parse_entry(name: str, entry: object, *, filename: str = "signoff.yaml") -> JudgeSettings:
    """One ``judges:`` entry validated."""
    path = f"judges.{name}"
    if not isinstance(entry, Mapping):
        raise PolicyError(
            "a judge is a mapping with a kind, like {kind: openai, base_url: ..., model: ...}",
            path=path,
            file=filename,
        )
    kind = entry.get("kind")
    if kind not in _MODELS:
        what = "is missing" if kind is None else f"is {kind!r}"
        raise PolicyError(
            f"kind {what}; expected one of {', '.join(KINDS)}", path=f"{path}.kind", file=filename
        )
    data = dict(entry)
    for key in _EXPANDED:
        if key in data:
            try:
                data[key] = expand_env(data[key], f"{path}.{key}")
            except PolicyError as exc:
                raise PolicyError(exc.message, path=exc.path, file=filename) from None
    try:
        settings = _MODELS[str(kind)].model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        raise PolicyError(message, path=f"{path}.{where}", file=filename) from None
    assert isinstance(settings, OpenAIJudgeSettings | PythonJudgeSettings | LangChainJudgeSettings)
    return settings


def _name(name: object, filename: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise PolicyError(
            "a judge's name is letters, digits, _ and - (starting with a letter or _), "
            f"got {name!r}",
            path=f"judges.{name}",
            file=filename,
        )
    return name


def from_sections(
    sections: Mapping[str, Any], *, filename: str = "signoff.yaml"
) -> dict[str, JudgeSettings]:
    """The ``judges:`` section of a policy's runtime sections, validated."""
    return parse(sections.get("judges"), filename=filename)


def check_sections(sections: Mapping[str, Any], *, filename: str) -> None:
    """The ``judges:`` checker of the section registry (:mod:`signoff.policy.sections`)."""
    for name, settings in from_sections(sections, filename=filename).items():
        if isinstance(settings, OpenAIJudgeSettings) and settings.api_key:
            _read_env(settings.api_key, f"judges.{name}.api_key", filename)


def build_judges(
    section: Mapping[str, Any] | None, *, filename: str = "signoff.yaml"
) -> dict[str, Judge]:
    """Ready judges from the ``judges:`` section (raw, or as :func:`parse` returns it).

    Imports the referenced code and reads API keys from the environment; any failure is a
    PolicyError naming the key. Close each judge with ``await judge.aclose()``.
    """
    if section is None:
        return {}
    parsed = {
        name: entry
        if isinstance(entry, OpenAIJudgeSettings | PythonJudgeSettings | LangChainJudgeSettings)
        else parse_entry(_name(name, filename), entry, filename=filename)
        for name, entry in section.items()
    }
    return {name: build_judge(name, s, filename=filename) for name, s in parsed.items()}


def build_judge(name: str, settings: JudgeSettings, *, filename: str = "signoff.yaml") -> Judge:
    """One ready judge from its validated settings."""
    path = f"judges.{name}"
    if isinstance(settings, OpenAIJudgeSettings):
        try:
            from signoff.judges.openai_judge import OpenAIJudge
        except ImportError:
            raise PolicyError(
                "kind openai needs the openai package: pip install 'signoff[judge]'",
                path=f"{path}.kind",
                file=filename,
            ) from None
        api_key = None
        if settings.api_key:
            api_key = _read_env(settings.api_key, f"{path}.api_key", filename)
        return OpenAIJudge(name, settings, api_key=api_key)
    if isinstance(settings, PythonJudgeSettings):
        from signoff.judges.python_judge import PythonJudge

        function = resolve_object(settings.function, f"{path}.function", filename)
        if not callable(function):
            raise PolicyError(
                f"{settings.function} is not a function", path=f"{path}.function", file=filename
            )
        inquiry_fn = None
        if settings.inquiry_function:
            where = f"{path}.inquiry_function"
            inquiry_fn = resolve_object(settings.inquiry_function, where, filename)
            if not callable(inquiry_fn):
                raise PolicyError(
                    f"{settings.inquiry_function} is not a function", path=where, file=filename
                )
        return PythonJudge(name, settings, function, inquiry_fn)
    from signoff.judges.langchain_judge import LangChainJudge, chat_model

    target = resolve_object(settings.model, f"{path}.model", filename)
    try:
        model = chat_model(target)
    except TypeError as exc:
        raise PolicyError(str(exc), path=f"{path}.model", file=filename) from None
    return LangChainJudge(name, settings, model)


def resolve_object(ref: str, path: str, filename: str) -> Any:
    """The object ``module:attr`` names (``attr`` may be dotted); PolicyError if absent."""
    module_name, _, attr = ref.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise PolicyError(
            f"cannot import {module_name} ({exc})", path=path, file=filename
        ) from None
    for part in attr.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise PolicyError(
                f"{module_name} has no attribute {attr}", path=path, file=filename
            ) from None
    return found


def _read_env(env: str, path: str, filename: str) -> str:
    value = os.environ.get(env)
    if not value:
        raise PolicyError(
            f"environment variable {env} is not set (referenced as ${{{env}}})",
            path=path,
            file=filename,
        )
    return value
