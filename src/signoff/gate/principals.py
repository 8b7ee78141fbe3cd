"""``gate: {strict_principals: true}``: only people in ``people:`` may be principals.

Without it, a call made for a principal nobody listed is evaluated like any other (its roles
are whatever the calling code says). With it, such a call is denied before the policy runs,
with rule ``unknown_principal``: an agent cannot act for someone the directory never heard
of (``erin.w``, or erin with an invisible character) to slip past self-approval or a rule on
``principal.id``. Names match the directory by id or alias after NFKC + casefold, so
``Erin`` is erin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from signoff.gate.settings import GateSettings
from signoff.model import Verdict
from signoff.policy import Policy

if TYPE_CHECKING:  # checking.py imports this module for default_pipeline
    from signoff.gate.checking import CheckState

UNKNOWN_PRINCIPAL = "unknown_principal"


def unknown_principal(policy: Policy, principal_id: str) -> str | None:
    """Why ``principal_id`` is refused under ``strict_principals``, or None when it is listed."""
    if policy.knows(principal_id):
        return None
    # The directory is not listed: this text reaches the agent (and its model).
    return (
        f"principal {principal_id!r} is not in the people: directory (gate.strict_principals "
        "is on); add them to people:, or as an alias of a listed person"
    )


class PrincipalStage:
    """Deny calls for principals not in ``people:`` when ``gate.strict_principals`` is on.

    Reads the setting once; when it is off the stage costs one attribute test per call.
    """

    name = "principals"

    def __init__(self, policy: Policy, *, strict: bool | None = None) -> None:
        self.policy = policy
        self.strict = (
            GateSettings.from_policy(policy).strict_principals if strict is None else strict
        )

    def __call__(self, state: CheckState) -> None:
        if not self.strict:
            return
        reason = unknown_principal(self.policy, state.ctx.principal.id)
        if reason is not None:
            state.verdict = Verdict.deny(
                UNKNOWN_PRINCIPAL, reason, policy_hash=self.policy.short_hash
            )
