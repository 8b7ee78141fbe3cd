"""The rule a grant is for, when its creator did not name one.

A grant covers the calls the policy sends to one rule id. ``signoff grant add`` and
``POST /v1/grants`` may leave the rule out: it is then the rule the policy sends a call of the
tool to, where the call's arguments are the literal equalities of the grant's ``when:``
(``{args.env: prod}`` or ``{args.env: {eq: prod}}``, also inside ``all:``). If a rule reads an
argument those do not fix, the answer would be a guess, so the creator must name the rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from signoff.model import CallContext, DecisionError, PolicyError, ToolCall
from signoff.policy.engine import Policy
from signoff.policy.grants import compile_grant_condition

_UNFIXED = object()
_HOW = "name the rule with --rule ID (`rule` in the API; `signoff policy explain` shows rules)"


def literal_args(when: Mapping[str, Any] | None) -> dict[str, Any]:
    """The arguments a ``when:`` pins to one value (``{"args.env": "prod"}`` → ``{"env":
    "prod"}``); operators other than ``eq`` pin nothing."""
    args: dict[str, Any] = {}
    for key, value in (when or {}).items():
        if key == "all" and isinstance(value, list | tuple):
            for item in value:
                if isinstance(item, Mapping):
                    _merge(args, literal_args(item))
            continue
        if not isinstance(key, str) or not key.startswith("args.") or "[" in key:
            continue
        literal = _literal(value)
        if literal is not _UNFIXED:
            _set(args, key.split(".")[1:], literal)
    return args


def _literal(value: object) -> object:
    if isinstance(value, Mapping):
        return value["eq"] if set(value) == {"eq"} else _UNFIXED
    if isinstance(value, list | tuple):
        return _UNFIXED
    return value


def _set(args: dict[str, Any], path: list[str], value: object) -> None:
    node = args
    for part in path[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            return
        node = child
    node.setdefault(path[-1], value)


def _merge(into: dict[str, Any], other: dict[str, Any]) -> None:
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into.setdefault(key, value)


def resolve_rule(
    policy: Policy,
    tool: str,
    when: Mapping[str, Any] | None = None,
    *,
    principal: str | None = None,
    agent: str | None = None,
    thread: str | None = None,
) -> str:
    """The id of the rule the policy sends such a call to for approval.

    Raises :class:`DecisionError` (``field="rule"``) when that cannot be told from the tool and
    the conditions, or when such a call is not sent for approval at all (a grant for it would
    never apply); ``field="when"`` when the conditions themselves are malformed.
    """
    try:  # a malformed condition is the problem to report, not the rule it hides
        compile_grant_condition(policy, when, where="when")
    except PolicyError as exc:
        raise DecisionError(exc.message, field="when") from None
    call = ToolCall(tool, literal_args(when))
    ctx = CallContext(
        principal=policy.principal(principal or "anonymous"),
        agent=agent,
        thread=thread or "default",
    )
    explanation = policy.explain(call, ctx)
    for step in explanation.steps:
        if step.outcome == "error":
            raise DecisionError(
                f"cannot tell which rule {tool} calls covered by this grant go to: rule "
                f"{step.rule} needs what the grant's conditions do not fix ({step.error}); " + _HOW,
                field="rule",
            )
    verdict = explanation.verdict
    if verdict is None or verdict.errors:
        raise DecisionError(
            f"cannot tell which rule {tool} calls covered by this grant go to; " + _HOW,
            field="rule",
        )
    if not verdict.needs_approval:
        done = "allows" if verdict.allowed else "denies"
        raise DecisionError(
            f"the policy {done} such {tool} calls (rule {verdict.rule}) without asking anyone, "
            f"so a grant would never apply; to cover calls another rule asks about, {_HOW}",
            field="rule",
        )
    return verdict.rule
