"""What the policy says about grants: their ``when:`` conditions (the policy's own syntax,
compiled the same way) and the review a rule asks for (who could approve alone)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from signoff.model import CallContext, PolicyError, ReviewSpec, ToolCall
from signoff.policy.conditions import CondCompiler
from signoff.policy.engine import Policy
from signoff.policy.source import Loc, Problems, Source

GrantCondition = Callable[[ToolCall, CallContext], bool]


def compile_grant_condition(
    policy: Policy, when: Mapping[str, Any] | None, *, where: str = "grant.when"
) -> GrantCondition:
    """A grant's ``when:`` as a closure; a malformed one raises :class:`PolicyError`.

    ``rate:`` is refused: a grant covers calls by what they are, not by how often they come.
    An evaluation error counts as "does not match" (the call then goes to a human).
    """
    if not when:
        return _always
    if "rate" in when:
        raise PolicyError("a grant's conditions cannot use rate:", path=f"{where}.rate")
    problems = Problems()
    compiler = CondCompiler(problems, {p.id: p.roles for p in policy.people.values()})
    cond = compiler.when(dict(when), Loc(Source(where)))
    problems.raise_if_any()
    assert cond is not None

    def test(call: ToolCall, ctx: CallContext) -> bool:
        try:
            return bool(cond(call, ctx, None))
        except Exception:
            return False

    return test


def _always(call: ToolCall, ctx: CallContext) -> bool:
    return True


def rule_review(policy: Policy, tool: str, rule: str) -> ReviewSpec | None:
    """The review rule ``rule`` asks for on ``tool`` (None if that tool has no such rule, or
    the rule does not ask for approval)."""
    for outcome in policy.outcomes_for(tool):
        if outcome.rule == rule and outcome.kind == "require_approval":
            return outcome.spec
    return None
