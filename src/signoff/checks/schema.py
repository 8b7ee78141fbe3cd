"""The schema check: arguments must match the tool's signature or JSON Schema before
any policy looks at them, so ``"50000"`` vs ``50000`` is caught with a message the model can
act on, not discovered by a comparison deep in a rule."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Protocol, get_type_hints

import jsonschema
from pydantic import BaseModel, ConfigDict, ValidationError, create_model


class ArgsSchema(Protocol):
    """Validates one tool's arguments; ``json_schema`` is shown to approvers editing a call."""

    json_schema: dict[str, Any]

    def errors(self, args: Mapping[str, Any]) -> list[str]:
        """Human-readable field errors (``amount: Input should be a valid integer``).

        An empty list means the arguments are valid.
        """
        ...


class ModelArgs:
    """A schema given as a pydantic model class (pydantic does the validating)."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model
        self.json_schema: dict[str, Any] = model.model_json_schema()

    def errors(self, args: Mapping[str, Any]) -> list[str]:
        try:
            self.model.model_validate(args)
        except ValidationError as exc:
            return [_format_pydantic(err) for err in exc.errors()]
        return []


class FunctionArgs(ModelArgs):
    """A schema derived from a Python function's signature."""

    def __init__(self, fn: Callable[..., Any], *, title: str | None = None) -> None:
        super().__init__(_model_for(fn, title or fn.__name__))


class JSONSchemaArgs:
    """A schema given as JSON Schema (MCP ``inputSchema``, OpenAI function parameters)."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.json_schema = dict(schema)
        cls = jsonschema.validators.validator_for(self.json_schema)
        cls.check_schema(self.json_schema)
        self._validator = cls(self.json_schema)

    def errors(self, args: Mapping[str, Any]) -> list[str]:
        problems = []
        for err in sorted(self._validator.iter_errors(dict(args)), key=lambda e: list(e.path)):
            where = ".".join(str(p) for p in err.path) or "(arguments)"
            problems.append(f"{where}: {err.message}")
        return problems


def schema_for(source: Callable[..., Any] | Mapping[str, Any] | type[BaseModel]) -> ArgsSchema:
    """Build the schema check from a function, a pydantic model class or a JSON Schema."""
    if isinstance(source, Mapping):
        return JSONSchemaArgs(source)
    if isinstance(source, type) and issubclass(source, BaseModel):
        return ModelArgs(source)
    return FunctionArgs(source)


def _format_pydantic(err: Any) -> str:
    where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
    msg = str(err["msg"])
    if err["type"] == "extra_forbidden":
        msg = "unexpected argument"
    elif err["type"] == "missing":
        msg = "missing required argument"
    return f"{where}: {msg}"


def _model_for(fn: Callable[..., Any], title: str) -> type[BaseModel]:
    sig = inspect.signature(fn)
    try:
        hints = get_type_hints(fn)
    except Exception:  # unresolvable forward references: validate presence only
        hints = {}
    fields: dict[str, Any] = {}
    extra = "forbid"
    for name, param in sig.parameters.items():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            extra = "allow"
            continue
        if param.kind is inspect.Parameter.VAR_POSITIONAL or name in ("self", "cls"):
            continue
        annotation = hints.get(name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[name] = (annotation, default)
    config = ConfigDict(extra=extra, arbitrary_types_allowed=True, title=title)  # type: ignore[typeddict-item]
    model: type[BaseModel] = create_model(f"{title}_args", __config__=config, **fields)
    return model
