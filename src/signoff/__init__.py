"""signoff — the human sign-off layer for AI-agent tool calls.

>>> from signoff import Gate
>>> gate = Gate.from_config("signoff.yaml")          # doctest: +SKIP
>>> @gate.guard
... def transfer_funds(amount: int, to: str) -> str: ...
"""

# The composition root wires channels and remote gates into the gate (see its docstring).
from signoff import assemble as assemble
from signoff.gate import Gate, Submission
from signoff.model import (
    Action,
    AlreadyDecided,
    AlreadyExecuted,
    ApprovalRequest,
    CallContext,
    Cancelled,
    Decision,
    DecisionError,
    Denied,
    Expired,
    IdempotencyConflict,
    NotAuthorized,
    NotFound,
    PolicyError,
    Principal,
    Rejected,
    Responded,
    ReviewSpec,
    SignoffError,
    StoreError,
    ToolCall,
    Verdict,
)
from signoff.policy import Policy

__version__ = "0.1.0"

__all__ = [
    "Action",
    "AlreadyDecided",
    "AlreadyExecuted",
    "ApprovalRequest",
    "CallContext",
    "Cancelled",
    "Decision",
    "DecisionError",
    "Denied",
    "Expired",
    "Gate",
    "IdempotencyConflict",
    "NotAuthorized",
    "NotFound",
    "Policy",
    "PolicyError",
    "Principal",
    "Rejected",
    "Responded",
    "ReviewSpec",
    "SignoffError",
    "StoreError",
    "Submission",
    "ToolCall",
    "Verdict",
    "__version__",
]
