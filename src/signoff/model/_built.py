"""Models built from values the gate has checked already, without pydantic checking them again.

Pydantic validates every field of a model it constructs; the gate builds a request, its
calls and review configs, and each decision record on every cycle from values it made
itself or already validated (a policy's review, a parsed :class:`Decision`, its own ids and
clocks). :func:`built` makes such a model the way validation would leave it — the same
field dict in the model's field order, defaults filled in, the same set of fields given —
for a fraction of the cost.

It is only for values of exactly the field's type: nothing is converted (an ``int`` for a
``float`` field stays an ``int``, where validation would make it a float and the JSON would
change). Every caller checks what it got from outside by exact type, or takes the validated
path (``cls(**values)``) for anything else; ``tests/model/test_built.py`` holds both paths to
dump alike. Never for what an agent or approver sent before it was validated.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from signoff.model._clone import _ATOMIC

M = TypeVar("M", bound=BaseModel)

_SET_FIELDS_SET = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_SET_EXTRA = BaseModel.__dict__["__pydantic_extra__"].__set__
_SET_PRIVATE = BaseModel.__dict__["__pydantic_private__"].__set__


class _Plan(NamedTuple):
    template: dict[str, Any]  # every field in order: its default (factories: filled after)
    factories: tuple[tuple[str, Callable[[], Any]], ...]
    size: int
    required: frozenset[str]


_PLANS: dict[type[BaseModel], _Plan] = {}


def _plan(cls: type[BaseModel]) -> _Plan:
    if cls.model_config.get("extra") == "allow" or cls.__private_attributes__:
        raise TypeError(f"{cls.__name__}: built() serves models without extras or private state")
    template: dict[str, Any] = {}
    factories: list[tuple[str, Callable[[], Any]]] = []
    required = set()
    for name, info in cls.model_fields.items():
        if info.default_factory is not None:
            if info.default_factory_takes_validated_data:
                raise TypeError(f"{cls.__name__}.{name}: a default factory taking data")
            factory: Callable[[], Any] = info.default_factory  # type: ignore[assignment]
            template[name] = None
            factories.append((name, factory))
        elif info.default is PydanticUndefined:
            template[name] = None  # required: every caller gives it (checked)
            required.add(name)
        elif type(info.default) in _ATOMIC:
            template[name] = info.default
        else:  # a mutable default: each model gets its own copy, as validation gives
            template[name] = None
            factories.append((name, partial(copy.deepcopy, info.default)))
    return _Plan(template, tuple(factories), len(template), frozenset(required))


def built(cls: type[M], values: dict[str, Any]) -> M:
    """``cls(**values)`` for values already of their fields' exact types, unvalidated."""
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _plan(cls)
    fields = {**plan.template, **values}  # the template's (field) order, the given values
    if len(fields) != plan.size or not plan.required <= values.keys():
        unknown = sorted(set(values) - set(plan.template))
        missing = sorted(plan.required - values.keys())
        raise TypeError(f"{cls.__name__}: unknown fields {unknown}, missing fields {missing}")
    for name, factory in plan.factories:
        if name not in values:
            fields[name] = factory()
    new = cls.__new__(cls)
    object.__setattr__(new, "__dict__", fields)
    _SET_FIELDS_SET(new, set(values))
    _SET_EXTRA(new, None)
    _SET_PRIVATE(new, None)
    return new


def assign(model: BaseModel, values: dict[str, Any]) -> None:
    """Set several fields at once, as one ``model.name = value`` each would: the state
    machine's models have no ``validate_assignment`` and are not frozen, so pydantic's
    ``__setattr__`` writes the field dict and notes the name as set — twice a Python call
    per field, on every transition. Only for field names (tests/model/test_built.py)."""
    model.__dict__.update(values)
    model.__pydantic_fields_set__.update(values)
