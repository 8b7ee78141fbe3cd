"""Field references (``args.target.env``, ``principal.roles``, ``context.time``) as getters.

A getter is compiled once at load and reads a call with dict-key lookups only — never
``getattr`` on user data — so a policy can reach nothing but the call's own values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from signoff.model import CallContext, ToolCall

Getter = Callable[[ToolCall, CallContext], Any]

FIELD_ROOTS = ("tool", "args", "principal", "context")
FIELD_HINT = (
    "a field is tool, args.NAME, principal.id, principal.roles or context.NAME "
    "(context fields: thread, agent, environment, time, user_request, reasoning, or any attr)"
)


class EvalError(Exception):
    """A condition could not be evaluated for this call; the policy's on_error decides."""


class Missing(EvalError):
    """The field a condition reads is absent from the call."""

    def __init__(self, field: str, detail: str = "") -> None:
        self.field = field
        super().__init__(f"missing {field}{detail}")


class FieldSyntaxError(ValueError):
    """A field name in the policy that no getter can be built for (load time)."""


def kind(value: object) -> str:
    """The name of a value's kind as the policy sees it (bool is not a number)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "str"
    if isinstance(value, datetime):
        return "datetime"
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, list | tuple | set | frozenset):
        return "list"
    return type(value).__name__


def compile_field(name: str, directory_roles: Mapping[str, frozenset[str]]) -> Getter:
    """A getter for field ``name``; raises FieldSyntaxError when the name is not a field.

    ``principal.roles`` consults the people directory first (the directory wins), so a
    policy cannot be fooled by roles an integration put on the principal.
    """
    if not isinstance(name, str) or not name:
        raise FieldSyntaxError(f"unknown field {name!r}; {FIELD_HINT}")
    parts = name.split(".")
    root, rest = parts[0], parts[1:]
    if root not in FIELD_ROOTS:
        raise FieldSyntaxError(f"unknown field {name!r}; {FIELD_HINT}")
    if any(not p for p in rest):
        raise FieldSyntaxError(f"field {name!r} has an empty part; {FIELD_HINT}")
    if root == "tool":
        if rest:
            raise FieldSyntaxError(f"field 'tool' has no parts (got {name!r}); use tool")
        return _tool
    if root == "principal":
        return _principal_getter(name, rest, directory_roles)
    if not rest:
        raise FieldSyntaxError(f"field {name!r} needs a name, like {root}.NAME")
    if root == "args":
        return _args_getter(name, rest)
    return _context_getter(name, rest)


def _tool(call: ToolCall, ctx: CallContext) -> Any:
    return call.name


def _principal_getter(
    name: str, rest: list[str], directory_roles: Mapping[str, frozenset[str]]
) -> Getter:
    if rest == ["id"]:

        def principal_id(call: ToolCall, ctx: CallContext) -> Any:
            return ctx.principal.id

        return principal_id
    if rest == ["roles"]:

        def principal_roles(call: ToolCall, ctx: CallContext) -> Any:
            listed = directory_roles.get(ctx.principal.id)
            return ctx.principal.roles if listed is None else listed

        return principal_roles
    raise FieldSyntaxError(f"unknown field {name!r}; the principal has only id and roles")


def _args_getter(name: str, keys: list[str]) -> Getter:
    if len(keys) == 1:
        key = keys[0]

        def arg(call: ToolCall, ctx: CallContext) -> Any:
            try:
                return call.args[key]
            except KeyError:
                raise Missing(name) from None

        return arg

    def nested_arg(call: ToolCall, ctx: CallContext) -> Any:
        return _dig(call.args, keys, name, "args")

    return nested_arg


def _context_getter(name: str, keys: list[str]) -> Getter:
    first, more = keys[0], keys[1:]

    def context_field(call: ToolCall, ctx: CallContext) -> Any:
        try:
            value = ctx.field(first)
        except KeyError:
            raise Missing(name) from None
        return _dig(value, more, name, f"context.{first}") if more else value

    return context_field


def _dig(value: Any, keys: list[str], name: str, prefix: str) -> Any:
    """Follow ``keys`` through nested mappings (dict-key lookups only)."""
    for key in keys:
        if not isinstance(value, Mapping):
            raise Missing(name, f" ({prefix} is a {kind(value)}, not a mapping)")
        try:
            value = value[key]
        except KeyError:
            raise Missing(name) from None
        prefix = f"{prefix}.{key}"
    return value
