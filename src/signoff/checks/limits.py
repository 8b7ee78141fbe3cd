"""Limits at the door: what an agent may send before anything is checked, stored or shown.

One bad input must never take signoff down, and an approver must see exactly what runs.
So before the schema, validators and policy look at a call, its arguments (and the context's
``attrs``, which are JSON too) must be data every surface can carry faithfully:

* nested at most ``max_json_depth`` levels, at most ``max_args_bytes`` as canonical JSON;
* numbers finite (no NaN or ±Infinity, which compare false to every bound) and integers
  within ±(2**53 − 1), the range every JSON reader (a browser, jq) keeps exactly;
* objects keyed by strings; values JSON already has, or — for a Python function with a
  signature — values whose JSON form, validated back through that signature, gives an equal
  value (``datetime``, ``Decimal``, ``Path``, enums, pydantic models and dataclasses do;
  ``bytes`` typed ``Any``, sets typed ``Any`` and arbitrary objects do not).

Over-limit context *text* (``user_request``, ``reasoning``) is not refused: conversations are
long. It is cut to ``max_text_chars`` with a visible marker (:func:`clip_text`).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PydanticSchemaGenerationError, TypeAdapter
from pydantic_core import PydanticSerializationError, to_jsonable_python

from signoff.model import InvalidInput
from signoff.policy.settings import SettingsSection, expand_env, validated

MAX_SAFE_INTEGER = 2**53 - 1
_NATIVE_SCALARS = (str, bool, type(None))


@dataclass(frozen=True, slots=True)
class Limits:
    """The ``limits:`` section of ``signoff.yaml``, with its defaults."""

    max_json_depth: int = 32
    max_args_bytes: int = 262_144
    max_calls_per_request: int = 100
    max_text_chars: int = 8192

    @classmethod
    def from_sections(
        cls, sections: Mapping[str, Mapping[str, Any]], *, filename: str = "signoff.yaml"
    ) -> Limits:
        data = expand_env(dict(sections.get("limits") or {}), "limits")
        s = validated(_Wrapper, {"limits": data}, filename).limits
        return cls(s.max_json_depth, s.max_args_bytes, s.max_calls_per_request, s.max_text_chars)


class _LimitsSection(SettingsSection):
    max_json_depth: int = Field(default=32, ge=2, le=1000)
    max_args_bytes: int = Field(default=262_144, ge=64)
    max_calls_per_request: int = Field(default=100, ge=1)
    max_text_chars: int = Field(default=8192, ge=64)


class _Wrapper(SettingsSection):
    limits: _LimitsSection = Field(default_factory=_LimitsSection)


def check_sections(sections: Mapping[str, Mapping[str, Any]], *, filename: str) -> None:
    """The ``limits:`` checker of the section registry (:mod:`signoff.policy.sections`)."""
    Limits.from_sections(sections, filename=filename)


class _Foreign(Exception):
    """A value JSON does not have (a datetime, bytes, an object): needs a signature."""

    def __init__(self, path: str) -> None:
        self.path = path


class _Walk:
    """One pass over a JSON-like value: depth, numbers, keys, and a size estimate."""

    __slots__ = ("chars", "limits")

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.chars = 0

    def value(self, v: Any, path: str, depth: int) -> None:
        t = type(v)  # exact types first: isinstance against ABCs costs more than the walk
        if t is str:
            self.chars += len(v) + 2
        elif t is int:
            self._int(v, path)
        elif t is float:
            self._float(v, path)
        elif t is bool or v is None:
            self.chars += 5
        elif t is dict:
            self._mapping(v, path, depth)
        elif t is list or t is tuple:
            self._sequence(v, path, depth)
        elif isinstance(v, str):
            self.chars += len(v) + 2
        elif isinstance(v, bool):
            self.chars += 5
        elif isinstance(v, int):
            self._int(v, path)
        elif isinstance(v, float):
            self._float(v, path)
        elif isinstance(v, Mapping):
            self._mapping(v, path, depth)
        elif isinstance(v, list | tuple):
            self._sequence(v, path, depth)
        else:
            raise _Foreign(path)

    def _int(self, v: int, path: str) -> None:
        if not -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER:
            raise InvalidInput(
                "integer outside ±(2**53 − 1), which JSON readers round; "
                "pass large numbers as strings",
                field=path,
            )
        self.chars += 20

    def _float(self, v: float, path: str) -> None:
        if not math.isfinite(v):
            raise InvalidInput(f"{v} is not a number JSON can carry", field=path)
        self.chars += 24

    def _mapping(self, v: Mapping[Any, Any], path: str, depth: int) -> None:
        self._depth(depth + 1, path)
        for key, item in v.items():
            if type(key) is not str and not isinstance(key, str):
                raise InvalidInput(f"object key {key!r} is not a string", field=path)
            self.chars += len(key) + 4
            self.value(item, f"{path}.{key}", depth + 1)

    def _sequence(self, v: list[Any] | tuple[Any, ...], path: str, depth: int) -> None:
        self._depth(depth + 1, path)
        for i, item in enumerate(v):
            self.chars += 1
            self.value(item, f"{path}.{i}", depth + 1)

    def _depth(self, depth: int, path: str) -> None:
        if depth > self.limits.max_json_depth:
            raise InvalidInput(
                f"nested deeper than limits.max_json_depth ({self.limits.max_json_depth})",
                field=path,
            )


def _measure(value: Any, limits: Limits, field: str) -> None:
    """One walk (raising InvalidInput, or _Foreign at a non-JSON value), then the exact size
    only when the estimate says it may be over."""
    walk = _Walk(limits)
    try:
        walk.value(value, field, 0)
    except RecursionError:
        raise InvalidInput("nested too deeply", field=field) from None
    if walk.chars * 4 > limits.max_args_bytes:  # UTF-8 takes at most 4 bytes a character
        size = canonical_size(value)
        if size > limits.max_args_bytes:
            raise InvalidInput(
                f"{size} bytes as JSON, over limits.max_args_bytes ({limits.max_args_bytes})",
                field=field,
            )


def check_json(value: Mapping[str, Any], limits: Limits, field: str) -> None:
    """Raise :class:`InvalidInput` (naming the field) unless ``value`` is faithful JSON data
    within the limits."""
    try:
        _measure(value, limits, field)
    except _Foreign as foreign:
        raise InvalidInput(
            "this value has no faithful JSON form (what approvers see would differ from what "
            "runs); pass JSON data (strings, numbers, booleans, lists, objects)",
            field=foreign.path,
        ) from None


def canonical_size(value: Any) -> int:
    """Bytes of the canonical JSON form (sorted keys, compact, UTF-8)."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return len(text.encode("utf-8"))


def check_args(
    args: Mapping[str, Any],
    limits: Limits,
    *,
    field: str = "args",
    model: type[BaseModel] | None = None,
) -> None:
    """Like :func:`check_json`, but Python values are accepted when ``model`` (the tool's
    signature) proves them faithful: their JSON form, validated back, gives an equal value.

    Plain JSON arguments cost one walk; only arguments that are not JSON are round-tripped.
    """
    if model is None:
        check_json(args, limits, field)
        return
    walk = _Walk(limits)
    walk._depth(1, field)
    shown: dict[str, Any] = {}
    for key, value in args.items():
        path = f"{field}.{key}"
        walk.chars += len(key) + 4
        try:
            walk.value(value, path, 1)
        except _Foreign:
            converted = _round_trip(model, key, value, path)
            walk.value(converted, path, 1)  # a converted value is JSON: no _Foreign here
            shown[key] = converted
        except RecursionError:
            raise InvalidInput("nested too deeply", field=path) from None
    if walk.chars * 4 > limits.max_args_bytes:
        size = canonical_size({**args, **shown})
        if size > limits.max_args_bytes:
            raise InvalidInput(
                f"{size} bytes as JSON, over limits.max_args_bytes ({limits.max_args_bytes})",
                field=field,
            )


def faithful_json(args: Mapping[str, Any], model: type[BaseModel], field: str) -> dict[str, Any]:
    """Every argument's JSON form (what approvers are shown), if each validates back through
    ``model`` to an equal value; else :class:`InvalidInput` naming the argument."""
    return {k: _round_trip(model, k, v, f"{field}.{k}") for k, v in args.items()}


def _round_trip(model: type[BaseModel], key: str, value: Any, path: str) -> Any:
    try:
        shown = to_jsonable_python(value)
    except (PydanticSerializationError, ValueError, TypeError):
        raise InvalidInput(
            f"a {type(value).__name__} has no JSON form; approvers could not see it",
            field=path,
        ) from None
    try:
        again = _adapter(model, key).validate_python(shown)
    except Exception:
        again = _MISSING
    if not _equal(again, value):
        raise InvalidInput(
            f"a {type(value).__name__} would be shown as {_preview(shown)} but that does not "
            "give the same value back; pass a type the signature declares (or JSON data)",
            field=path,
        )
    return shown


@functools.lru_cache(maxsize=1024)
def _adapter(model: type[BaseModel], key: str) -> TypeAdapter[Any]:
    """How ``model`` validates argument ``key`` (``Any`` for ``**kwargs`` extras)."""
    info = model.model_fields.get(key)
    annotation: Any = Any if info is None or info.annotation is None else info.annotation
    try:
        return TypeAdapter(annotation)
    except PydanticSchemaGenerationError:  # a plain class in the signature: compare by ==
        return TypeAdapter(annotation, config=ConfigDict(arbitrary_types_allowed=True))


_MISSING = object()


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:
        return False


def _preview(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def clip_text(text: str | None, limits: Limits) -> tuple[str | None, int]:
    """``text`` cut to ``max_text_chars`` with a visible marker, and how many chars went."""
    if text is None or len(text) <= limits.max_text_chars:
        return text, 0
    cut = len(text) - limits.max_text_chars
    return text[: limits.max_text_chars] + f"… [truncated {cut} chars]", cut


def check_submission(
    calls: Sequence[Any], attrs: Mapping[str, Any], limits: Limits, *, prefix: str = "tool_calls"
) -> None:
    """A whole step from the outside (REST, a remote agent): the call count, each call's
    arguments and the context's ``attrs``, each refusal naming ``tool_calls.N.args…``."""
    if len(calls) > limits.max_calls_per_request:
        raise InvalidInput(
            f"{len(calls)} calls in one step, over limits.max_calls_per_request "
            f"({limits.max_calls_per_request})",
            field=prefix,
        )
    for i, call in enumerate(calls):
        check_json(call.args, limits, f"{prefix}.{i}.args")
    if attrs:
        check_json(attrs, limits, "context.attrs")
