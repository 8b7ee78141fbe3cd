"""Secret-named arguments: which names, how their values are masked, digested, kept from edits.

One list for every surface: the top-level ``redact_keys`` of ``signoff.yaml`` (``ui.redact_keys``
is its older name), case-insensitive RE2 patterns searched in every argument name at any
depth (``cfg.password`` too). Wherever arguments are shown (API, inbox, chat, e-mail, exports)
the value of a secret-named key is replaced by :data:`REDACTED`; wherever they are kept after
they are needed (finished request rows, audit events) it becomes a keyed digest
``{"redacted": "hmac-sha256:<hex>"}`` — the same value always gives the same digest, so "was
the key that ran the key that was approved" stays answerable without the key in clear.

The digest is ``HMAC-SHA256(key, "signoff-redacted-value\\n" + canonical JSON of the value)``
keyed with ``audit.key`` (``${SIGNOFF_AUDIT_KEY}``), or, without one, with a random secret the
store keeps (``Store.redaction_salt``). Names are agent-chosen, so each name's answer is cached
(up to :data:`NAME_CACHE` names) and the patterns run on RE2 (linear time).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

from pydantic_core import to_jsonable_python

from signoff.model import PolicyError
from signoff.policy.regex import compile_any
from signoff.policy.settings import expand_env

log = logging.getLogger("signoff.policy")

#: Argument names whose values are never shown (case-insensitive regular expressions).
DEFAULT_REDACT_KEYS: Final = (
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
REDACTED: Final = "••••••"
DIGEST_PREFIX: Final = "hmac-sha256:"
#: Audit events keep at most this many bytes of a call's (redacted) arguments as JSON.
AUDIT_ARGS_LIMIT: Final = 4096
NAME_CACHE: Final = 4096
_DOMAIN: Final = b"signoff-redacted-value\n"
_MISSING: Final = object()
_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


class NameMatcher(Protocol):
    """Anything that says whether an argument name is secret (a :class:`SecretKeys`, or the
    server's compiled ``Regex``)."""

    def search(self, text: str) -> bool: ...


class SecretKeys:
    """Which argument names are secret. Immutable in effect; answers are cached per name."""

    __slots__ = ("_known", "_regex", "patterns")

    def __init__(self, patterns: Sequence[str] = DEFAULT_REDACT_KEYS) -> None:
        # RE2: the names matched are the agent's. A bad pattern raises RegexError naming it.
        self.patterns = tuple(patterns)
        self._regex = compile_any(self.patterns, ignore_case=True) if self.patterns else None
        self._known: dict[str, bool] = {}

    def search(self, name: str) -> bool:
        """True when ``name`` is secret-named."""
        known = self._known.get(name)
        if known is not None:
            return known
        found = self._regex is not None and self._regex.search(name)
        if len(self._known) < NAME_CACHE:  # agent-chosen names: the cache stays bounded
            self._known[name] = found
        return found

    def any_in(self, value: Any) -> bool:
        """True when ``value`` holds a secret-named key at any depth. On the audit path of
        every allowed call: a plain loop over cached answers."""
        if type(value) is dict or isinstance(value, Mapping):
            known = self._known
            for k, v in value.items():
                found = known.get(k) if type(k) is str else None
                if found is None:
                    found = self.search(str(k))
                if found or (type(v) not in _SCALARS and self.any_in(v)):
                    return True
            return False
        if _is_sequence(value):
            return any(self.any_in(v) for v in value)
        return False

    def __deepcopy__(self, memo: dict[int, object]) -> SecretKeys:
        return self

    def __repr__(self) -> str:
        return f"SecretKeys({list(self.patterns)!r})"


def _is_sequence(value: Any) -> bool:
    return isinstance(value, list | tuple)


def is_digest(value: Any) -> bool:
    """True for a digest placeholder ``{"redacted": "hmac-sha256:<hex>"}``."""
    return (
        isinstance(value, Mapping)
        and len(value) == 1
        and isinstance(value.get("redacted"), str)
        and value["redacted"].startswith(DIGEST_PREFIX)
    )


def is_placeholder(value: Any) -> bool:
    """True for a value a surface showed instead of a secret (masked or digested)."""
    return (isinstance(value, str) and value == REDACTED) or is_digest(value)


def mask(value: Any, secrets: NameMatcher | None) -> Any:
    """A copy of ``value`` with every secret-named value (any depth) shown as
    :data:`REDACTED`; digests already in place are kept (they say nothing in clear)."""
    if secrets is None:
        return value
    if isinstance(value, Mapping):
        return {
            k: v if is_digest(v) else REDACTED if secrets.search(str(k)) else mask(v, secrets)
            for k, v in value.items()
        }
    if _is_sequence(value):
        return [mask(v, secrets) for v in value]
    return value


def _jsonable(value: Any) -> Any:
    try:
        return to_jsonable_python(value)
    except Exception:  # whatever it is, its text form is what JSON would show
        return str(value)


_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False, default=_jsonable
)
_SHOWN = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_jsonable
)
_PLAIN_DEPTH = 64
_BLOCK = 64  # SHA-256's block size in bytes


# json's C encoder, as _CANONICAL.encode builds it for each call (with its own dict of the
# containers being encoded, to refuse a circular value), called directly: encode() first
# runs two Python-level methods and defines a closure the C encoder never uses (twice on
# every approval cycle: the created and executing events' arguments)
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)


def _canonical(value: Any) -> str:
    """``_CANONICAL.encode(value)``: the same text, the same errors."""
    if _c_make_encoder is None:  # a pure-Python json: its own path
        return _CANONICAL.encode(value)
    encoder = _c_make_encoder(
        {}, _jsonable, json.encoder.encode_basestring_ascii, None, ":", ",", True, False, False
    )
    return "".join(encoder(value, 0))


def _encode(encode: Callable[[Any], str], value: Any) -> tuple[str, bool]:
    """``value`` as JSON text, and whether it is exactly ``value``. Arguments a call was
    refused for (NaN, 5000-digit integers, non-string keys, absurd nesting) are written in
    a plain form rather than failing (second item False)."""
    try:
        return encode(value), True
    except (ValueError, TypeError, RecursionError):
        return encode(_plain(value, 0)), False


def _plain(value: Any, depth: int) -> Any:
    if depth > _PLAIN_DEPTH:
        return "…"
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        try:
            str(value)
        except ValueError:
            return f"(an integer of {value.bit_length()} bits)"
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v, depth + 1) for v in value]
    converted = _jsonable(value)
    return str(value) if converted is value else _plain(converted, depth + 1)


def digest(value: Any, key: bytes) -> str:
    """``hmac-sha256:<hex>`` of ``value``'s canonical JSON (sorted keys, compact, ASCII)."""
    return Hmac(key).text(_encode(_canonical, value)[0])


class Hmac:
    """HMAC-SHA256 (RFC 2104) with the key's inner and outer states computed once: a digest
    then costs two hash copies (a third of ``hmac.digest``'s time on short input)."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        if len(key) > _BLOCK:
            key = hashlib.sha256(key).digest()
        padded = key.ljust(_BLOCK, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in padded))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in padded))

    def text(self, canonical: str) -> str:
        """``hmac-sha256:<hex>`` of the domain prefix plus ``canonical``."""
        inner = self._inner.copy()
        inner.update(_DOMAIN)
        inner.update(canonical.encode("ascii"))
        outer = self._outer.copy()
        outer.update(inner.digest())
        return DIGEST_PREFIX + outer.hexdigest()


def cut_json(value: Any, limit: int = AUDIT_ARGS_LIMIT) -> Any:
    """``value`` as JSON data when its compact JSON fits ``limit`` UTF-8 bytes; otherwise the
    start of that JSON text (a string, ending in ``…``)."""
    text = _encode(_SHOWN.encode, value)[0]
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return json.loads(text)
    return data[: limit - 3].decode("utf-8", "ignore") + "…"


class Redaction:
    """The policy's secret names plus the digest key: what seals finished requests and
    redacts audit events (the :class:`signoff.model.secrets.Sealer` of a gate)."""

    def __init__(self, keys: SecretKeys, key: bytes | None = None) -> None:
        self.keys = keys
        self.configured = key is not None  # audit.key, as opposed to a store's salt
        # Until the store's salt is read (a gate not started yet): a process secret, so a
        # digest is never computable without a key — only not comparable across runs.
        self._hmac = Hmac(key if key is not None else os.urandom(32))

    def use_store_salt(self, salt: bytes) -> None:
        """Key digests with the store's salt, unless ``audit.key`` is configured."""
        if not self.configured:
            self._hmac = Hmac(salt)

    def digest(self, value: Any) -> str:
        """The keyed digest of ``value`` (``hmac-sha256:<hex>``)."""
        return self._hmac.text(_encode(_canonical, value)[0])

    def seal(self, value: dict[str, Any]) -> dict[str, Any]:
        """``value`` with each secret-named value (any depth) replaced by its digest."""
        if not self.keys.any_in(value):
            return value
        sealed: dict[str, Any] = self._sealed(value)
        return sealed

    def _sealed(self, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {
                k: (v if is_digest(v) else {"redacted": self.digest(v)})
                if self.keys.search(str(k))
                else self._sealed(v)
                for k, v in value.items()
            }
        if _is_sequence(value):
            return [self._sealed(v) for v in value]
        return value

    def audited(self, args: Mapping[str, Any]) -> tuple[Any, str]:
        """The audit form of ``args``: secrets digested, cut at 4 KiB; and the digest of the
        real arguments. Without a secret-named key the one canonical encoding serves both
        the digest and the size (the common case on the allowed path)."""
        real = dict(args)
        canonical, exact = _encode(_canonical, real)
        sealed = self.seal(real)
        if sealed is real and exact and len(canonical) <= AUDIT_ARGS_LIMIT:
            # Fits (ASCII-escaped JSON is never shorter than UTF-8): kept as is; the store's
            # encoder writes datetimes and the like the way it writes any event data.
            shown: Any = real
        else:
            shown = cut_json(sealed)
        return shown, self._hmac.text(canonical)

    def deferred(self, args: Mapping[str, Any]) -> tuple[Any, Any]:
        """:meth:`audited`, computed when the audit writer serializes the event (off the
        caller's hot path). See :class:`DeferredArgs`."""
        source = DeferredArgs(dict(args), self)
        return source.field(0), source.field(1)


class DeferredArgs:
    """The audit form of an allowed or denied call's arguments, worked out by the store's
    audit writer rather than on the guarded call's path.

    The store serializes event data with one JSON encoder whose fallback calls
    ``model_dump(mode="json")`` (as for pydantic models); each :class:`_Field` answers that
    with its part of :meth:`Redaction.audited`, computed once.
    """

    __slots__ = ("_args", "_redaction", "_result")

    def __init__(self, args: dict[str, Any], redaction: Redaction) -> None:
        self._args = args  # a shallow copy: the caller's own dict may change after the call
        self._redaction = redaction
        self._result: tuple[Any, str] | None = None

    def result(self) -> tuple[Any, str]:
        """Never raises: a failure here would fail the audit writer's whole batch."""
        if self._result is None:
            for _attempt in range(3):
                try:
                    self._result = self._redaction.audited(self._args)
                    break
                except RuntimeError:  # a nested value changed size while it was read
                    continue
                except Exception as exc:
                    self._result = (f"(arguments not recorded: {type(exc).__name__})", "")
                    break
            else:
                self._result = ("(arguments changed while they were recorded)", "")
            self._args = {}
        return self._result

    def field(self, index: int) -> _Field:
        return _Field(self, index)


class _Field:
    __slots__ = ("_index", "_source")

    def __init__(self, source: DeferredArgs, index: int) -> None:
        self._source, self._index = source, index

    def model_dump(self, mode: str = "json") -> Any:
        return self._source.result()[self._index]


def restore(edited: Any, original: Any, secrets: NameMatcher | None = None) -> Any:
    """``edited`` with each value shown as a placeholder (``REDACTED`` or a digest) — and,
    given ``secrets``, each secret-named value — taken from ``original`` at the same place
    when ``original`` has one there."""
    if isinstance(edited, Mapping):
        base = original if isinstance(original, Mapping) else {}
        out: dict[str, Any] = {}
        for k, v in edited.items():
            before = base.get(k, _MISSING)
            keep = before is not _MISSING and (
                is_placeholder(v) or (secrets is not None and secrets.search(str(k)))
            )
            out[k] = before if keep else restore(v, before, secrets)
        return out
    if _is_sequence(edited):
        base_list = list(original) if _is_sequence(original) else []
        items = []
        for i, v in enumerate(edited):
            before = base_list[i] if i < len(base_list) else _MISSING
            keep = before is not _MISSING and is_placeholder(v)
            items.append(before if keep else restore(v, before, secrets))
        return items
    return edited


def merge_edit(
    original: Mapping[str, Any], edited: Mapping[str, Any], secrets: NameMatcher | None = None
) -> dict[str, Any]:
    """The arguments an agent runs after an edit: the edited keys over its own original
    arguments, every secret-named (or masked) value taken from the original — a masked
    secret in an edit form never replaces the real one."""
    return {**original, **restore(dict(edited), original, secrets)}


def secret_changes(original: Any, edited: Any, secrets: NameMatcher, path: str = "") -> list[str]:
    """Paths (``cfg.password``, ``items[0].token``) where ``edited`` adds, removes or changes
    a secret-named value of ``original``."""
    if isinstance(original, Mapping) or isinstance(edited, Mapping):
        before = original if isinstance(original, Mapping) else {}
        after = edited if isinstance(edited, Mapping) else {}
        out: list[str] = []
        for k in dict.fromkeys([*before, *after]):
            where = f"{path}.{k}" if path else str(k)
            old, new = before.get(k, _MISSING), after.get(k, _MISSING)
            if secrets.search(str(k)):
                if old is not new and old != new:
                    out.append(where)
            else:
                out.extend(secret_changes(old, new, secrets, where))
        return out
    if _is_sequence(original) or _is_sequence(edited):
        old_items = list(original) if _is_sequence(original) else []
        new_items = list(edited) if _is_sequence(edited) else []
        out = []
        for i in range(max(len(old_items), len(new_items))):
            old = old_items[i] if i < len(old_items) else _MISSING
            new = new_items[i] if i < len(new_items) else _MISSING
            out.extend(secret_changes(old, new, secrets, f"{path}[{i}]"))
        return out
    return []


def mask_request(doc: dict[str, Any], secrets: NameMatcher | None) -> dict[str, Any]:
    """A request's wire JSON (``ApprovalRequest.to_wire``) with secret-named argument values
    masked wherever it holds arguments: the calls as asked and as they run, the edits
    proposed, the context's ``attrs``. Digests of finished calls are kept."""
    out = dict(doc)
    out["action_requests"] = [_masked_at(a, "args", secrets) for a in doc["action_requests"]]
    out["calls"] = [
        {**c, "action": _masked_at(c["action"], "args", secrets)} if c.get("action") else c
        for c in doc["calls"]
    ]
    out["decisions"] = [
        {**d, "edited_action": _masked_at(d["edited_action"], "args", secrets)}
        if d.get("edited_action")
        else d
        for d in doc.get("decisions", [])
    ]
    out["attrs"] = mask(doc.get("attrs") or {}, secrets)
    return out


def mask_audit_data(data: Mapping[str, Any], secrets: NameMatcher | None) -> dict[str, Any]:
    """An audit event's ``data`` with secret-named values masked in the arguments it holds
    (``args``, ``edited_args``, each of ``calls[].args``). Rows written by this version hold
    digests there already (kept as they are, so their hashes still verify); older rows may
    hold secrets in clear."""
    out = dict(data)
    for name in ("args", "edited_args"):
        if isinstance(out.get(name), Mapping):
            out[name] = mask(out[name], secrets)
    calls = out.get("calls")
    if isinstance(calls, list):
        out["calls"] = [
            _masked_at(c, "args", secrets) if isinstance(c, Mapping) else c for c in calls
        ]
    return out


def _masked_at(entry: Mapping[str, Any], name: str, secrets: NameMatcher | None) -> Any:
    if not isinstance(entry.get(name), Mapping):
        return dict(entry)
    return {**entry, name: mask(entry[name], secrets)}


def audit_key(sections: Mapping[str, Mapping[str, Any]]) -> bytes | None:
    """``audit.key`` (``${SIGNOFF_AUDIT_KEY}``) as bytes; None when there is none (the store's
    salt keys digests then). An unset variable is reported by the ``audit:`` checker."""
    raw = sections.get("audit") or {}
    value = raw.get("key") if isinstance(raw, Mapping) else None
    if not isinstance(value, str) or not value:
        return None
    try:
        expanded = expand_env(value, "audit.key")
    except PolicyError as exc:
        log.warning("audit.key is not usable (%s); digests use the store's salt", exc.message)
        return None
    return str(expanded).encode("utf-8") if expanded else None


__all__ = [
    "AUDIT_ARGS_LIMIT",
    "DEFAULT_REDACT_KEYS",
    "DIGEST_PREFIX",
    "REDACTED",
    "DeferredArgs",
    "Hmac",
    "NameMatcher",
    "Redaction",
    "SecretKeys",
    "audit_key",
    "cut_json",
    "digest",
    "is_digest",
    "is_placeholder",
    "mask",
    "mask_audit_data",
    "mask_request",
    "merge_edit",
    "restore",
    "secret_changes",
]
