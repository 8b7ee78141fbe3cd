"""What a chat message or an email may show of a call's arguments.

Chat messages land on phones, lock screens, mail gateways and third-party servers, so the
values of secret-named arguments are masked at any depth (the policy's ``redact_keys``: the
same names every surface hides, see :mod:`signoff.policy.redact`) and long values are cut.
The full view stays behind the authenticated web page. Every name and value shown is made
inert (control, bidi and invisible characters visible: :func:`signoff.model.text.inert`)
before it is cut.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from signoff.model.text import ABSENT, changed_args, inert
from signoff.policy.redact import DEFAULT_REDACT_KEYS as DEFAULT_REDACT_KEYS
from signoff.policy.redact import REDACTED, SecretKeys, is_digest, mask

if TYPE_CHECKING:
    from signoff.policy import Policy


class Redactor:
    """Masks secret-named keys and shortens values for messages."""

    def __init__(
        self, keys: tuple[str, ...] | list[str] | SecretKeys = DEFAULT_REDACT_KEYS
    ) -> None:
        # RE2 (linear time): the names matched are the agent's. A bad pattern raises
        # RegexError naming it; `signoff policy check` reports it as redact_keys[i].
        self.secrets = keys if isinstance(keys, SecretKeys) else SecretKeys(keys)

    @classmethod
    def from_policy(cls, policy: Policy) -> Redactor:
        return cls(policy.secret_keys)

    def value(self, value: Any) -> Any:
        """A copy of ``value`` with the values of secret-named keys (any depth) masked."""
        return mask(value, self.secrets)

    def call(self, name: str, args: Mapping[str, Any], limit: int = 300) -> str:
        """``name(key=value, …)`` with secrets masked, cut to ``limit`` characters."""
        shown = self.value(dict(args))
        parts = [f"{inert(str(k))}={_short(v)}" for k, v in shown.items()]
        return cut(f"{inert(name)}({', '.join(parts)})", limit)

    def changes(self, before: Mapping[str, Any], after: Mapping[str, Any], limit: int = 300) -> str:
        """What an edit changed, ``key old → new; …`` (secrets masked), or ``""``."""
        parts = []
        for change in changed_args(before, after):
            old, new = (
                "(absent)" if v is ABSENT else _short(self.value({change.name: v})[change.name])
                for v in (change.before, change.after)
            )
            parts.append(f"{inert(change.name)} {old} → {new}")
        return cut("; ".join(parts), limit)


def _short(value: Any) -> str:
    if value == REDACTED or is_digest(value):
        return REDACTED  # a finished call's digest says nothing to a reader
    text = json.dumps(value, ensure_ascii=False, default=str)
    return cut(inert(text), 80)


def cut(text: str, limit: int) -> str:
    """``text`` shortened to ``limit`` characters, with an ellipsis when it was longer."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"
