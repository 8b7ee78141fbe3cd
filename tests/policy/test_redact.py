"""Secret-named arguments: one list (``redact_keys``), masking at any depth, keyed digests,
edits that can never replace a secret, and an audit form that never fails."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from signoff.model import PolicyError
from signoff.policy import Policy, redact
from signoff.policy.redact import (
    AUDIT_ARGS_LIMIT,
    DEFAULT_REDACT_KEYS,
    REDACTED,
    DeferredArgs,
    Redaction,
    SecretKeys,
    audit_key,
    digest,
    is_digest,
    mask,
    mask_audit_data,
    mask_request,
    merge_edit,
    restore,
    secret_changes,
)
from signoff.store.audit import json_native

KEY = b"k" * 32
SECRETS = SecretKeys()


def test_redact_keys_is_one_top_level_list() -> None:
    policy = Policy.from_yaml("version: 1\nredact_keys: [iban, 'pass(word)?']\n")
    assert policy.redact_keys == ("iban", "pass(word)?")
    assert policy.secret_keys.search("Customer_IBAN") and not policy.secret_keys.search("token")


def test_ui_redact_keys_is_an_alias_and_the_default_list_applies_without_either() -> None:
    assert Policy.from_yaml("version: 1\nui: {redact_keys: [iban]}\n").redact_keys == ("iban",)
    assert Policy.from_yaml("version: 1\n").redact_keys == DEFAULT_REDACT_KEYS


def test_redact_keys_and_a_different_ui_redact_keys_is_a_load_error() -> None:
    with pytest.raises(PolicyError) as err:
        Policy.from_yaml("version: 1\nredact_keys: [a]\nui: {redact_keys: [b]}\n")
    assert "ui.redact_keys" in str(err.value) and err.value.line == 2


def test_a_bad_redact_key_names_its_entry_and_line() -> None:
    with pytest.raises(PolicyError) as err:
        Policy.from_yaml("version: 1\nredact_keys:\n  - token\n  - '(a)\\1'\n")
    assert err.value.path == "signoff.yaml.redact_keys[1]" and "backreferences" in str(err.value)
    with pytest.raises(PolicyError) as err:
        Policy.from_yaml("version: 1\nredact_keys: token\n")
    assert "a list of regular expressions" in str(err.value)


def test_an_empty_list_masks_nothing() -> None:
    policy = Policy.from_yaml("version: 1\nredact_keys: []\n")
    assert mask({"password": "p"}, policy.secret_keys) == {"password": "p"}


def test_mask_reaches_every_depth_and_keeps_digests() -> None:
    value = {
        "cfg": {"password": "hunter2", "host": "db"},
        "items": [{"token": "t"}, {"name": "x"}],
        "api_key": {"redacted": "hmac-sha256:" + "0" * 64},
    }
    assert mask(value, SECRETS) == {
        "cfg": {"password": REDACTED, "host": "db"},
        "items": [{"token": REDACTED}, {"name": "x"}],
        "api_key": {"redacted": "hmac-sha256:" + "0" * 64},
    }


def test_secret_keys_cache_their_answer_per_name_but_stay_bounded() -> None:
    keys = SecretKeys()
    for i in range(5000):
        keys.search(f"name{i}")
    assert keys.search("api_key") and keys.search("API-KEY") and not keys.search("amount")
    assert len(keys._known) <= 4096


def test_digest_is_keyed_hmac_sha256_of_the_canonical_json() -> None:
    value = {"b": 1, "a": "x"}
    body = b'signoff-redacted-value\n{"a":"x","b":1}'
    expected = "hmac-sha256:" + hmac.new(KEY, body, hashlib.sha256).hexdigest()
    assert digest(value, KEY) == expected == Redaction(SECRETS, KEY).digest({"a": "x", "b": 1})
    assert digest(value, b"other key") != expected
    long_key = b"x" * 100  # longer than a block: hashed first, as RFC 2104 says
    assert digest(1, long_key) == "hmac-sha256:" + (
        hmac.new(long_key, b"signoff-redacted-value\n1", hashlib.sha256).hexdigest()
    )


def test_seal_replaces_secret_values_by_digests_and_is_idempotent() -> None:
    redaction = Redaction(SECRETS, KEY)
    args = {"api_key": "sk-LIVE-1", "cfg": {"password": "p"}, "amount": 5}
    sealed = redaction.seal(args)
    assert sealed["api_key"] == {"redacted": digest("sk-LIVE-1", KEY)}
    assert is_digest(sealed["cfg"]["password"]) and sealed["amount"] == 5
    assert redaction.seal(sealed) == sealed
    plain = {"amount": 5}
    assert redaction.seal(plain) is plain  # nothing secret: no copy


def test_audited_args_are_redacted_with_a_digest_of_the_real_value() -> None:
    redaction = Redaction(SECRETS, KEY)
    args = {"api_key": "sk-LIVE-1", "to": "acme"}
    shown, whole = redaction.audited(args)
    assert "sk-LIVE" not in json.dumps(shown) and shown["to"] == "acme"
    assert whole == digest(args, KEY)


def test_audited_args_are_cut_at_4_kib() -> None:
    shown, _ = Redaction(SECRETS, KEY).audited({"text": "é" * 10_000, "token": "sk-LIVE-1"})
    assert isinstance(shown, str) and shown.endswith("…")
    assert len(shown.encode()) <= AUDIT_ARGS_LIMIT and "sk-LIVE" not in shown


@pytest.mark.parametrize(
    "args",
    [
        {"amount": math.nan},
        {"amount": 10**5000},
        {"to": {1: "int key", "a": 2}},
        {"to": object()},
        {"at": datetime(2026, 11, 24, tzinfo=UTC), "limit": Decimal("1.5")},
    ],
)
def test_the_audit_form_of_refused_or_typed_arguments_is_json_and_never_raises(
    args: dict[str, object],
) -> None:
    a, b = Redaction(SECRETS, KEY).deferred(args)
    data = json_native({"args": a, "args_digest": b})  # what every store does with event data
    assert data["args_digest"].startswith("hmac-sha256:")
    json.dumps(data, allow_nan=False)


def test_deferred_arguments_are_a_snapshot_of_the_call() -> None:
    args = {"q": "a", "token": "t"}
    source = DeferredArgs(dict(args), Redaction(SECRETS, KEY))
    args["q"] = "changed later"
    shown, _ = source.result()
    assert shown["q"] == "a" and is_digest(shown["token"])


def test_restore_puts_the_original_back_where_a_placeholder_was_sent() -> None:
    original = {"cfg": {"password": "hunter2", "host": "a"}, "api_key": "sk", "n": 1}
    edited = {"cfg": {"password": REDACTED, "host": "b"}, "api_key": REDACTED, "n": 2}
    assert restore(edited, original) == {
        "cfg": {"password": "hunter2", "host": "b"},
        "api_key": "sk",
        "n": 2,
    }


def test_merge_edit_takes_secrets_from_the_agents_own_arguments() -> None:
    original = {"api_key": "sk-LIVE-1", "cfg": {"password": "p", "host": "a"}, "keep": 1}
    edited = {"api_key": "sk-EVIL", "cfg": {"password": REDACTED, "host": "b"}}
    assert merge_edit(original, edited, SECRETS) == {
        "api_key": "sk-LIVE-1",
        "cfg": {"password": "p", "host": "b"},
        "keep": 1,
    }
    # Without the names (a remote agent), a masked value still never replaces the real one.
    assert merge_edit(original, edited)["cfg"]["password"] == "p"


def test_secret_changes_name_every_touched_secret_path() -> None:
    original = {"cfg": {"password": "p"}, "items": [{"token": "t"}], "api_key": "k"}
    assert secret_changes(original, original, SECRETS) == []
    edited = {"cfg": {"password": "new"}, "items": [], "api_key": "k", "auth": "added"}
    assert secret_changes(original, edited, SECRETS) == ["cfg.password", "items[0].token", "auth"]
    assert secret_changes(original, {**original, "cfg": "flat"}, SECRETS) == ["cfg.password"]


def test_request_and_audit_wire_shapes_are_masked_where_they_hold_arguments() -> None:
    doc = {
        "action_requests": [{"args": {"api_key": "k"}, "tool_call_id": "c"}],
        "calls": [{"action": {"name": "t", "args": {"cfg": {"password": "p"}}}}],
        "decisions": [{"edited_action": {"name": "t", "args": {"token": "x"}}}, {"type": "a"}],
        "attrs": {"session": "s"},
        "review_configs": [{"args_schema": {"properties": {"password": {"type": "string"}}}}],
    }
    text = json.dumps(mask_request(doc, SECRETS))
    assert '"k"' not in text and '"p"' not in text and '"x"' not in text and '"s"' not in text
    assert '"password": {"type": "string"}' in text  # schemas are not arguments
    data = {"args": {"token": "x"}, "edited_args": {"password": "p"}, "calls": [{"args": {}}]}
    assert "x" not in json.dumps(mask_audit_data(data, SECRETS)).replace("args", "")


def test_audit_key_comes_from_the_audit_section(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T_AUDIT_KEY", "k" * 32)
    assert audit_key({"audit": {"key": "${T_AUDIT_KEY}"}}) == b"k" * 32
    assert audit_key({"audit": {}}) is None and audit_key({}) is None
    assert audit_key({"audit": {"key": "${T_UNSET_AUDIT_KEY}"}}) is None  # the checker says why


# the digest's canonical text comes from json's C encoder called directly: the same text, and
# the same refusals, as the canonical JSONEncoder's encode()
_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(), inner, max_size=4)
        | st.dictionaries(st.integers(), inner, max_size=3)
    ),
    max_leaves=20,
)


def _outcome(encode: Callable[[Any], str], value: Any) -> tuple[str, str]:
    try:
        return "text", encode(value)
    except (ValueError, TypeError, RecursionError) as exc:
        return type(exc).__name__, str(exc)


@given(_ANY_JSON)
def test_canonical_text_is_the_canonical_encoders(value: Any) -> None:
    assert _outcome(redact._canonical, value) == _outcome(redact._CANONICAL.encode, value)


def test_canonical_text_refuses_a_circular_value_and_nan_as_the_encoder_does() -> None:
    loop: list[Any] = []
    loop.append(loop)
    for value in (loop, {"x": math.nan}, {"when": datetime(2026, 1, 2, tzinfo=UTC)}):
        assert _outcome(redact._canonical, value) == _outcome(redact._CANONICAL.encode, value)
