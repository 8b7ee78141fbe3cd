"""What a chat message or an email may show of a call's arguments.

Chat messages land on phones, lock screens, mail gateways and third-party servers, so the
values of secret-looking argument names are replaced (the ``ui.redact_keys`` setting — the
same names the web inbox hides) and long values are cut. The full view stays behind the
authenticated web page. Every name and value shown is made inert (control, bidi and
invisible characters visible: :func:`signoff.model.text.inert`) before it is cut.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from signoff.model.text import ABSENT, changed_args, inert
from signoff.policy.regex import compile_any

if TYPE_CHECKING:
    from signoff.policy import Policy

REDACTED = "••••••"

#: Argument names whose values are never shown (case-insensitive regular expressions);
#: the web inbox's default ``ui.redact_keys``.
DEFAULT_REDACT_KEYS = (
    r"pass(word|wd|phrase)?",
    r"secret",
    r"token",
    r"api[_-]?key",
    r"auth(orization)?",
    r"credential",
    r"private[_-]?key",
    r"cookie",
    r"session",
)


class Redactor:
    """Redacts secret-looking keys and shortens values for messages."""

    def __init__(self, keys: tuple[str, ...] | list[str] = DEFAULT_REDACT_KEYS) -> None:
        # RE2 (linear time): the names matched are the agent's. A bad pattern raises
        # RegexError naming it; `signoff policy check` reports it as ui.redact_keys[i].
        self.pattern = compile_any(keys, ignore_case=True) if keys else None

    @classmethod
    def from_policy(cls, policy: Policy) -> Redactor:
        ui: Mapping[str, Any] = policy.sections.get("ui") or {}
        keys = ui.get("redact_keys")
        if isinstance(keys, list) and all(isinstance(k, str) for k in keys):
            return cls(keys)
        return cls()

    def value(self, value: Any) -> Any:
        """A copy of ``value`` with the values of secret-looking keys replaced."""
        if self.pattern is None:
            return value
        if isinstance(value, Mapping):
            return {
                k: REDACTED if self.pattern.search(str(k)) else self.value(v)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value

    def call(self, name: str, args: Mapping[str, Any], limit: int = 300) -> str:
        """``name(key=value, …)`` with secrets redacted, cut to ``limit`` characters."""
        shown = self.value(dict(args))
        parts = [f"{inert(str(k))}={_short(v)}" for k, v in shown.items()]
        return cut(f"{inert(name)}({', '.join(parts)})", limit)

    def changes(self, before: Mapping[str, Any], after: Mapping[str, Any], limit: int = 300) -> str:
        """What an edit changed, ``key old → new; …`` (secrets redacted), or ``""``."""
        parts = []
        for change in changed_args(before, after):
            old, new = (
                "(absent)" if v is ABSENT else _short(self.value({change.name: v})[change.name])
                for v in (change.before, change.after)
            )
            parts.append(f"{inert(change.name)} {old} → {new}")
        return cut("; ".join(parts), limit)


def _short(value: Any) -> str:
    if value == REDACTED:
        return REDACTED
    text = json.dumps(value, ensure_ascii=False, default=str)
    return cut(inert(text), 80)


def cut(text: str, limit: int) -> str:
    """``text`` shortened to ``limit`` characters, with an ellipsis when it was longer."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"
