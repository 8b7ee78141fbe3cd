"""Errors are types; each message tells the user what to do next."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from signoff.model.requests import ApprovalRequest
    from signoff.model.verdicts import Verdict


class SignoffError(Exception):
    """Base class of every error signoff raises on purpose."""


class PolicyError(SignoffError, ValueError):
    """A policy file (or mapping) is malformed. Raised at load time, never during a call.

    A ``ValueError`` too: LangChain raises ``ValueError`` for an invalid ``interrupt_on``, and
    code written for it catches that."""

    def __init__(
        self, message: str, *, path: str = "", line: int | None = None, file: str | None = None
    ) -> None:
        self.message = message
        self.path = path
        self.line = line
        self.file = file
        where = path
        if line is not None:
            where = f"{where} (line {line})" if where else f"line {line}"
        super().__init__(f"{where}: {message}" if where else message)


class PolicyErrors(PolicyError):
    """Several policy errors found in one load; ``errors`` lists each one."""

    def __init__(self, errors: list[PolicyError]) -> None:
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))
        self.args = ("\n".join(str(e) for e in errors),)

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)


class DecisionError(SignoffError, ValueError):
    """A human decision is invalid; nothing was stored and the request stays pending.

    A ``ValueError`` too (so :class:`NotAuthorized` is one): LangChain's middleware raises
    ``ValueError`` for a disallowed or unknown decision type, a bad edit or a wrong count.

    ``field`` names the offending part (``decisions[1].type``, ``edited_action.args.amount``).
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.message = message
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class NotAuthorized(DecisionError):
    """The person may not decide this request (role, self-approval, not in the directory)."""


class AlreadyDecided(SignoffError):
    """The request (or call) was already decided; says by whom, when and how."""

    def __init__(
        self,
        message: str,
        *,
        request_id: str,
        by: str | None = None,
        at: datetime | None = None,
        outcome: str | None = None,
    ) -> None:
        self.request_id = request_id
        self.by = by
        self.at = at
        self.outcome = outcome
        super().__init__(message)


class NotFound(SignoffError):
    """No request with this id."""


class IdempotencyConflict(SignoffError):
    """A tool-call id was re-submitted on the same thread with different arguments."""


class StoreError(SignoffError):
    """The store could not be used. The gate fails closed on it."""


class RequestQuarantined(StoreError):
    """The stored row of one request cannot be read (deep nesting, corrupt JSON, a manual
    edit…): it is quarantined — left out of lists, counts, sweeps and notifications — until
    someone cancels it (``signoff cancel ID``) or repairs it."""

    def __init__(self, request_id: str, reason: str, *, status: str | None = None) -> None:
        self.request_id = request_id
        self.reason = reason
        self.status = status
        if status is None or status == "pending":
            then = f"`signoff cancel {request_id}` closes it"
        else:
            then = f"it is already {status}"
        super().__init__(
            f"request {request_id} cannot be read: {reason}; it is quarantined; {then}"
        )


class ToolCallStopped(SignoffError):
    """Base of the outcomes that stop a gated tool from running."""

    def __init__(
        self,
        message: str,
        *,
        call_id: str | None = None,
        tool: str | None = None,
        request_id: str | None = None,
        **extra: Any,
    ) -> None:
        self.message = message
        self.call_id = call_id
        self.tool = tool
        self.request_id = request_id
        self.extra = extra
        super().__init__(message)


class Denied(ToolCallStopped):
    """The policy (or schema, or a validator) denied the call; ``verdict`` names the rule."""

    verdict: Verdict | None = None


class Rejected(ToolCallStopped):
    """A human rejected the call; ``message`` carries the reason."""

    request: ApprovalRequest | None = None


class Expired(ToolCallStopped):
    """No decision arrived before the deadline, and ``on_timeout`` is reject."""

    request: ApprovalRequest | None = None


class Cancelled(ToolCallStopped):
    """The request was cancelled before a decision."""

    request: ApprovalRequest | None = None


class Responded(ToolCallStopped):
    """A human answered instead of running the tool; ``message`` is the answer."""

    request: ApprovalRequest | None = None


class AlreadyExecuted(ToolCallStopped):
    """This approved call already ran (or is running): exactly-once forbids running it again."""


class InvalidInput(SignoffError):
    """Input refused at the door (over a limit, not finite, no faithful JSON form); nothing
    was checked, stored or shown. ``field`` names the part (``args.cfg.items.3``)."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.message = message
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class LeaseHeld(SignoffError):
    """Another live process is waiting on this request: it may not be taken over."""

    def __init__(self, message: str, *, request_id: str | None = None) -> None:
        self.message = message
        self.request_id = request_id
        super().__init__(message)
