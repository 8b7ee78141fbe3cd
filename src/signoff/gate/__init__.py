"""The runtime: evaluate → submit → notify → wait → resolve → run → record."""

from signoff.gate.checking import CheckState, Pipeline, ToolInfo, Validator
from signoff.gate.context import current_context
from signoff.gate.core import Gate
from signoff.gate.decisions import request_context
from signoff.gate.messages import outcome_text
from signoff.gate.submission import Submission

__all__ = [
    "CheckState",
    "Gate",
    "Pipeline",
    "Submission",
    "ToolInfo",
    "Validator",
    "current_context",
    "outcome_text",
    "request_context",
]
