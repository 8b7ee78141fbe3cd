"""LangChain's ``interrupt_on`` shorthand, translated into a version-1 policy mapping.

``{"write_file": True, "execute_sql": {"allowed_decisions": [...]}, "read_data": False}``
keeps LangChain's meaning: True asks with every decision type, a dict narrows the decision
types, False (or absent) runs the tool. A dict without a non-empty ``allowed_decisions`` is an
error, as in LangChain >= 1.3.15 — a typo must never silently turn review off.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from signoff.model import DECISION_TYPES
from signoff.policy.source import Loc, Problems, Source

CONFIG_KEYS = ("allowed_decisions", "description", "args_schema", "when")
ALL_DECISIONS = list(DECISION_TYPES)


def translate_interrupt_on(
    mapping: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The policy mapping plus, per tool, what only the LangChain integration can use
    (a ``when`` predicate, a callable description, ``args_schema``)."""
    root = Loc(Source("interrupt_on"))
    if not isinstance(mapping, Mapping):
        raise root.error("interrupt_on is a mapping of tool name to True, False or a config dict")
    problems = Problems()
    tools: dict[str, Any] = {}
    extras: dict[str, dict[str, Any]] = {}
    for name, config in mapping.items():
        here = root.key(name)
        if not isinstance(name, str) or not name:
            problems.add(here, f"a tool name is a non-empty string, got {name!r}")
            continue
        if config is False:
            continue
        rule = _rule(name, config, here, problems, extras)
        if rule is not None:
            tools[name] = {"rules": [rule]}
    problems.raise_if_any()
    # memory://: the gate keeps requests in memory unless given a store (and compiling
    # needs no working directory, which an event loop must not block on).
    data = {
        "version": 1,
        "store": "memory://",
        "defaults": {"unknown_tool": "allow"},
        "tools": tools,
    }
    return data, extras


def _rule(
    name: str,
    config: object,
    loc: Loc,
    problems: Problems,
    extras: dict[str, dict[str, Any]],
) -> dict[str, Any] | None:
    rule: dict[str, Any] = {
        "id": f"interrupt_on.{name}",
        "decision": "require_approval",
        "allowed_decisions": ALL_DECISIONS,
        "editable_args": "*",
        "approvers": {"any": True},
        "forbid_self_approval": False,
    }
    if config is True:
        return rule
    if not isinstance(config, Mapping):
        problems.add(
            loc, f"invalid interrupt_on config for tool {name!r}: use True, False or a dict"
        )
        return None
    unknown = sorted(str(k) for k in config if k not in CONFIG_KEYS)
    if unknown:
        problems.add(
            loc,
            f"invalid interrupt_on config for tool {name!r}: unknown key(s) {unknown}; "
            f"allowed: {list(CONFIG_KEYS)}",
        )
        return None
    decisions = config.get("allowed_decisions")
    if (
        not isinstance(decisions, list | tuple)
        or not decisions
        or any(d not in DECISION_TYPES for d in decisions)
    ):
        problems.add(
            loc.key("allowed_decisions"),
            f"invalid interrupt_on config for tool {name!r}: allowed_decisions must be a "
            f"non-empty list of decision types (e.g. ['approve', 'reject']), got {decisions!r}",
        )
        return None
    rule["allowed_decisions"] = list(dict.fromkeys(decisions))
    description = config.get("description")
    if isinstance(description, str):
        rule["description"] = description.replace("{", "{{").replace("}", "}}")
    elif description is not None and not callable(description):
        problems.add(loc.key("description"), "description is a string or a callable")
        return None
    extra = {k: config[k] for k in ("when", "args_schema") if config.get(k) is not None}
    if callable(description):
        extra["description"] = description
    if extra:
        extras[name] = extra
    return rule
