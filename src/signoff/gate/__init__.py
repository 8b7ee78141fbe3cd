"""The runtime: evaluate → submit → notify → wait → resolve → run → record."""

from signoff.gate.context import current_context
from signoff.gate.core import Gate, Submission, ToolInfo, Validator, request_context
from signoff.gate.messages import outcome_text

__all__ = [
    "Gate",
    "Submission",
    "ToolInfo",
    "Validator",
    "current_context",
    "outcome_text",
    "request_context",
]
