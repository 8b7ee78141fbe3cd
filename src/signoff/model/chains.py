"""Approval chains: ``approvers: {stages: [...]}`` and ``approvers: {all_of: [...]}``.

``stages`` are asked one after the other: stage 2's people are asked only once stage 1 has
its quorum, and a stage may have its own deadline and ``on_timeout``. ``all_of`` groups are
asked at once, and each needs its own quorum, in any order. With ``distinct`` (the default)
a person counts once across the whole chain. Anyone in any group may reject (a reject can
only make things safer); an approve or an edit must come from the stage now asked (stages)
or from a group still short of its quorum (all_of).

Pure functions over a call's :class:`ReviewConfig` and :class:`CallState`, used by the state
machine (:mod:`signoff.model.resolution`), the notification planner and every surface.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from signoff.model._built import assign
from signoff.model.identity import PersonKey, contains_person, person_key

if TYPE_CHECKING:  # types only: requests.py uses these helpers for its own sentences
    from signoff.model.requests import ApproversInfo, CallState, ReviewConfig


def fresh(cfg: ReviewConfig, call: CallState) -> None:
    """(Re)start ``call``'s chain at stage 1 with nobody counted (a no-op for plain approvers)."""
    groups = cfg.approvers.groups
    if groups:
        assign(call, {"stage": 0, "group_approvals": [[] for _ in groups], "approvals": []})
    else:  # plain approvers
        assign(call, {"stage": 0, "group_approvals": []})


def _progress(cfg: ReviewConfig, call: CallState) -> list[list[str]]:
    """The per-group lists, padded for a row written before the call became a chain."""
    groups = cfg.approvers.groups
    while len(call.group_approvals) < len(groups):
        call.group_approvals.append([])
    return call.group_approvals


def stage_config(cfg: ReviewConfig, call: CallState) -> ReviewConfig:
    """The review in force for the stage ``call`` is at: the stage's own ``timeout_s``,
    ``on_timeout`` and escalation over the review's (``cfg`` itself when no stage sets any)."""
    stages = cfg.approvers.stages
    if not stages:
        return cfg
    stage = stages[min(call.stage, len(stages) - 1)]
    update: dict[str, object] = {}
    if stage.timeout_s is not None:
        update["timeout_s"] = stage.timeout_s
    if stage.on_timeout is not None:
        update["on_timeout"] = stage.on_timeout
        update["escalate_to"] = stage.escalate_to
        update["escalate_after_s"] = stage.escalate_after_s
    return cfg.model_copy(update=update) if update else cfg


def asked_now(cfg: ReviewConfig, call: CallState) -> ApproversInfo:
    """The group whose approval the call waits for now: the current stage of a ``stages``
    chain, every group of an ``all_of`` chain, or the plain approvers."""
    stages = cfg.approvers.stages
    if stages:
        return stages[min(call.stage, len(stages) - 1)]
    return cfg.approvers


def label(group: ApproversInfo) -> str:
    """A group in a few words: ``finance``, ``finance or security``, ``alice or bob``."""
    if group.any:
        return "any"
    return " or ".join([*group.roles, *group.users]) or "listed"


def progress(cfg: ReviewConfig, call: CallState) -> str:
    """How far the call's chain is, e.g. ``stage 2 of 2: 1 of 2 finance approvals`` or
    ``all of: 1 of 1 finance, 0 of 1 security approvals``; empty for plain approvers."""
    groups = cfg.approvers.groups
    if not groups:
        return ""
    got = _progress(cfg, call)
    if cfg.approvers.stages:
        i = min(call.stage, len(groups) - 1)
        g = groups[i]
        plural = "s" if g.quorum != 1 else ""
        return (
            f"stage {i + 1} of {len(groups)}: {len(got[i])} of {g.quorum} "
            f"{label(g)} approval{plural}"
        )
    parts = [f"{len(got[i])} of {g.quorum} {label(g)}" for i, g in enumerate(groups)]
    return "all of: " + ", ".join(parts) + " approvals"


def refusal(
    cfg: ReviewConfig,
    call: CallState,
    person: str,
    roles: Iterable[str],
    *,
    escalated: bool,
    key: PersonKey = person_key,
    edit: bool = False,
) -> str | None:
    """Why ``person`` may not approve (or, with ``edit``, edit) ``call``'s chain now (None:
    they may). An edit restarts the chain, so only the stage now asked matters for it."""
    approvers = cfg.approvers
    held = frozenset(roles)
    got = _progress(cfg, call)
    if approvers.stages:
        i = min(call.stage, len(approvers.stages) - 1)
        here = asked_now(cfg, call).admits(person, held, key)
        eff = stage_config(cfg, call)
        if not here and escalated and eff.escalate_to is not None:
            here = eff.escalate_to.admits(person, held, key)
        if not here:
            return (
                f"{person} may not approve {cfg.action_name} now: it is at stage {i + 1} of "
                f"{len(approvers.stages)}, which needs {label(approvers.stages[i])} "
                "(anyone in the chain may reject)"
            )
        if edit:
            return None
        earlier = next((j for j in range(i) if contains_person(got[j], person, key)), None)
        if approvers.distinct and earlier is not None:
            return (
                f"{person} already approved {cfg.action_name} at stage {earlier + 1}; the same "
                f"person never counts twice in a chain (distinct: true): stage {i + 1} needs "
                f"another person with {label(approvers.stages[i])}"
            )
        return None
    if edit:
        return None
    if approvers.distinct and contains_person(call.approvals, person, key):
        return (
            f"{person} already counted for {cfg.action_name}; the same person never counts "
            "twice in a chain (distinct: true): the remaining groups need other people"
        )
    if not _open_groups(cfg, call, person, held, key):
        missing = [label(g) for j, g in enumerate(approvers.groups) if len(got[j]) < g.quorum]
        return (
            f"{person} may not approve {cfg.action_name}: every group they belong to has its "
            f"approvals; still needed: {', '.join(missing) or 'nothing'}"
        )
    return None


def _open_groups(
    cfg: ReviewConfig, call: CallState, person: str, roles: frozenset[str], key: PersonKey
) -> list[int]:
    """The ``all_of`` groups ``person`` is in, has not counted for, and that still lack
    approvals."""
    got = _progress(cfg, call)
    return [
        j
        for j, g in enumerate(cfg.approvers.groups)
        if len(got[j]) < g.quorum
        and not contains_person(got[j], person, key)
        and g.admits(person, roles, key)
    ]


def count(
    cfg: ReviewConfig,
    call: CallState,
    person: str,
    roles: Iterable[str],
    key: PersonKey = person_key,
) -> bool:
    """Count an approval already allowed by :func:`refusal`; False when ``person`` already
    counted for the current stage (recorded, not counted again — as in a plain quorum)."""
    got = _progress(cfg, call)
    if cfg.approvers.stages:
        here = got[min(call.stage, len(got) - 1)]
        if contains_person(here, person, key):
            return False
        here.append(person)
    else:
        groups = _open_groups(cfg, call, person, frozenset(roles), key)
        if not groups:
            return False
        # distinct: one group, the first unfinished one in the order written; otherwise a
        # person in several groups counts for each of them.
        for j in groups[:1] if cfg.approvers.distinct else groups:
            got[j].append(person)
    if not contains_person(call.approvals, person, key):
        call.approvals.append(person)
    return True


def done_with(cfg: ReviewConfig, call: CallState, person: str, key: PersonKey) -> bool:
    """Whether ``person``'s approval can no longer count for ``call`` (so surfaces stop
    offering it): they counted already — under ``distinct: false`` at a later stage they
    may count again."""
    if not contains_person(call.approvals, person, key):
        return False
    if cfg.approvers.chained and not cfg.approvers.distinct:
        return counted_now(cfg, call, person, key)
    return True


def counted_now(cfg: ReviewConfig, call: CallState, person: str, key: PersonKey) -> bool:
    """Whether ``person`` already counted for what the call waits for now (a repeat of their
    approve changes nothing); False for someone who counted only at an earlier stage."""
    if not cfg.approvers.stages:
        return True
    got = _progress(cfg, call)
    return contains_person(got[min(call.stage, len(got) - 1)], person, key)


def describe(approvers: ApproversInfo) -> str:
    """A chain spelled out: ``stage 1: manager; stage 2: 2 of finance`` or ``one from each
    of: finance; security``."""
    parts = []
    for i, g in enumerate(approvers.groups):
        who = label(g) if g.quorum == 1 else f"{g.quorum} of {label(g)}"
        parts.append(f"stage {i + 1}: {who}" if approvers.stages else who)
    if approvers.stages:
        return "; ".join(parts)
    return "one from each of: " + "; ".join(parts)


def advance(cfg: ReviewConfig, call: CallState) -> bool:
    """Move a ``stages`` chain to its next stage when the current one has its quorum;
    True when a new stage started (it must be notified and gets its own deadline)."""
    stages = cfg.approvers.stages
    got = _progress(cfg, call)
    if not stages or call.stage >= len(stages) - 1:
        return False
    if len(got[call.stage]) < stages[call.stage].quorum:
        return False
    call.stage += 1
    return True


def complete(cfg: ReviewConfig, call: CallState) -> bool:
    """Whether the call has every approval it needs (every group its quorum, or the plain
    quorum)."""
    groups = cfg.approvers.groups
    if not groups:
        return len(call.approvals) >= call.quorum
    got = _progress(cfg, call)
    return all(len(got[j]) >= g.quorum for j, g in enumerate(groups))
