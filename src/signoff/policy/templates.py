"""Description templates: ``"Transfer {args.amount} to {args.to}"``.

Placeholders are checked at load and rendered with dict lookups only (no ``str.format``, so
``{args.__class__}`` is just a missing key, never an attribute). ``{{`` and ``}}`` are literal
braces. A value the call does not have renders as ``<missing>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from signoff.model import CallContext, ToolCall
from signoff.policy.fields import FieldSyntaxError, Getter, compile_field

MISSING = "<missing>"
PLACEHOLDER_HINT = "use {tool}, {args.NAME}, {principal.id}, {principal.roles} or {context.NAME}"
_TEMPLATE_ROOTS = ("tool", "args.", "principal.id", "principal.roles", "context.")


class TemplateError(ValueError):
    """A description template that cannot be compiled (load time)."""


class Template:
    """A compiled template: literal text and getters, rendered per call."""

    __slots__ = ("_constant", "_parts", "source")

    def __init__(self, source: str, parts: list[str | Getter]) -> None:
        self.source = source
        self._parts = tuple(parts)
        self._constant: str | None = None
        if all(isinstance(p, str) for p in parts):
            self._constant = "".join(p for p in parts if isinstance(p, str))

    @property
    def constant(self) -> str | None:
        """The rendered text when the template has no placeholders, else None."""
        return self._constant

    def render(self, call: ToolCall, ctx: CallContext) -> str:
        if self._constant is not None:
            return self._constant
        out: list[str] = []
        for part in self._parts:
            out.append(part if isinstance(part, str) else _render_value(part, call, ctx))
        return "".join(out)


def compile_template(source: object, directory_roles: Mapping[str, frozenset[str]]) -> Template:
    """Compile ``source``; raises TemplateError with a message saying how to fix it."""
    if not isinstance(source, str):
        raise TemplateError(f"a description is a string, got {type(source).__name__}")
    parts: list[str | Getter] = []
    literal: list[str] = []
    i, n = 0, len(source)
    while i < n:
        ch = source[i]
        if ch in "{}" and source.startswith(ch * 2, i):
            literal.append(ch)
            i += 2
        elif ch == "}":
            raise TemplateError("unmatched '}' in description; write '}}' for a literal brace")
        elif ch == "{":
            end = source.find("}", i)
            if end < 0:
                raise TemplateError("unclosed '{' in description; write '{{' for a literal brace")
            parts.append("".join(literal))
            literal = []
            parts.append(_placeholder(source[i + 1 : end], directory_roles))
            i = end + 1
        else:
            literal.append(ch)
            i += 1
    parts.append("".join(literal))
    return Template(source, [p for p in parts if p != ""])


def _placeholder(name: str, directory_roles: Mapping[str, frozenset[str]]) -> Getter:
    bad = TemplateError(f"bad placeholder '{{{name}}}'; {PLACEHOLDER_HINT}")
    if "{" in name or ":" in name or "!" in name or " " in name:
        raise bad
    if not (name == "tool" or name.startswith(_TEMPLATE_ROOTS[1:])):
        raise bad
    try:
        return compile_field(name, directory_roles)
    except FieldSyntaxError:
        raise bad from None


def _render_value(get: Getter, call: ToolCall, ctx: CallContext) -> str:
    try:
        value = get(call, ctx)
    except Exception:  # a description never breaks a verdict
        return MISSING
    try:
        return _text(value)
    except Exception:
        return "<unprintable>"


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, frozenset | set):
        return ", ".join(sorted(str(v) for v in value))
    return str(value)
