"""The inquiry server's wire shapes: its four tools (the descriptions are the prompt guidance a
model reads) and the structured result every question ends in."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import mcp_types as types

from signoff.integrations.mcp.texts import inquiry_guidance
from signoff.model import Answers, ApprovalRequest, utcnow
from signoff.model.fallback import is_judge

InquiryStatus = Literal["answered", "declined", "cancelled", "expired", "unavailable", "pending"]
STATUSES: tuple[str, ...] = ("answered", "declined", "cancelled", "expired", "unavailable")

WHEN_TO_ASK = (
    "Use it only when you cannot continue correctly without information that only the user "
    "has: the request is ambiguous between materially different readings, a required value "
    "is missing and cannot be looked up, or a choice has real consequences (spending money, "
    "deleting data, contacting people). Do not ask for facts your other tools can find, do "
    "not ask for permission to do what you were asked, and never ask the same question "
    "twice. Ask one specific question; give `choices` when the answer is one of a few "
    "options and `default_answer` when you have a sensible suggestion; use `questions` "
    "only for a few closely related questions that need answering together. If the status is not "
    "`answered`, continue with your best judgement and say what you assumed."
)

_QUESTION: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {
            "type": "string",
            "pattern": "^[A-Za-z0-9_-]{1,64}$",
            "description": "The key of this question's answer in the result.",
        },
        "question": {"type": "string", "minLength": 1},
        "choices": {"type": "array", "items": {"type": "string"}, "maxItems": 50},
        "multiple": {
            "type": "boolean",
            "description": "The human may pick several choices; the answer is a list.",
        },
        "default_answer": {
            "type": ["string", "array"],
            "items": {"type": "string"},
            "description": "Your suggestion (a list where `multiple`).",
        },
        "allow_other": {
            "type": "boolean",
            "description": "Accept an answer outside `choices` (default false).",
        },
    },
    "required": ["id", "question"],
    "additionalProperties": False,
}

_QUESTION_PROPS: dict[str, Any] = {
    "question": {
        "type": "string",
        "minLength": 1,
        "description": "One specific question (with `questions`: the form's title, optional).",
    },
    "choices": {
        "type": "array",
        "items": {"type": "string"},
        "maxItems": 50,
        "description": "Possible answers to pick from (optional); the answer must be one of "
        "them unless `allow_other` is true.",
    },
    "default_answer": {
        "type": "string",
        "description": "Your suggested answer; the human can submit it as-is (optional).",
    },
    "allow_other": {
        "type": "boolean",
        "description": "Accept an answer outside `choices` (default false).",
    },
    "questions": {
        "type": "array",
        "items": _QUESTION,
        "minItems": 1,
        "maxItems": 20,
        "description": "Instead of `question`: several questions asked in one round, each "
        "with an `id`; the answer is then an object keyed by question id.",
    },
    "format": {
        "type": "string",
        "enum": ["text", "markdown"],
        "description": "markdown: the web inbox renders the question text as markdown.",
    },
    "timeout_s": {
        "type": "number",
        "exclusiveMinimum": 0,
        "description": "How long to wait for an answer, in seconds (default 300).",
    },
}


def _result_schema(statuses: tuple[str, ...]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": list(statuses)},
            "answer": {
                "type": ["string", "object", "null"],
                "description": "A string, or with `questions` an object keyed by question id.",
            },
            "inquiry_id": {"type": "string"},
            "waited_s": {"type": "number"},
            "answered_by": {
                "type": "string",
                "description": "Set only when no human answered in time and the fallback "
                "judge did (`judge:NAME`): the answer is model output, not a human's.",
            },
        },
        "required": ["status", "answer", "inquiry_id", "waited_s"],
    }


RESULT_SCHEMA = _result_schema(STATUSES)
PENDING_RESULT_SCHEMA = _result_schema((*STATUSES, "pending"))
ANSWER_RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "accepted": {"type": "boolean"},
        "inquiry_id": {"type": "string"},
        "status": {"type": "string", "enum": [*STATUSES, "pending"]},
    },
    "required": ["accepted", "inquiry_id", "status"],
}

TOOLS: tuple[types.Tool, ...] = (
    types.Tool(
        name="send_inquiry",
        description="Ask the human user a question and wait for the answer. " + WHEN_TO_ASK,
        input_schema={
            "type": "object",
            "properties": _QUESTION_PROPS,
            "additionalProperties": False,
        },
        output_schema=RESULT_SCHEMA,
    ),
    types.Tool(
        name="start_inquiry",
        description="Like send_inquiry, but returns at once with the inquiry_id instead of "
        "waiting; collect the answer later with get_answer. Use it when the answer may take "
        "long (minutes to hours) and you can do other work meanwhile. " + WHEN_TO_ASK,
        input_schema={
            "type": "object",
            "properties": _QUESTION_PROPS,
            "additionalProperties": False,
        },
        output_schema=PENDING_RESULT_SCHEMA,
    ),
    types.Tool(
        name="get_answer",
        description="The answer to a question asked with start_inquiry, waiting up to wait_s "
        "seconds for it (status `pending` if there is none yet).",
        input_schema={
            "type": "object",
            "properties": {
                "inquiry_id": {"type": "string", "minLength": 1},
                "wait_s": {"type": "number", "minimum": 0},
            },
            "required": ["inquiry_id"],
            "additionalProperties": False,
        },
        output_schema=PENDING_RESULT_SCHEMA,
    ),
    types.Tool(
        name="answer_inquiry",
        description="For a human's client, not for the model: answer an open inquiry by id "
        "(from another device or client), with `answer` (a string) or a form's `answers` "
        "(keyed by question id). The first answer wins; the client that asked may not answer.",
        input_schema={
            "type": "object",
            "properties": {
                "inquiry_id": {"type": "string", "minLength": 1},
                "answer": {"type": "string", "minLength": 1},
                "answers": {
                    "type": "object",
                    "description": "A form's answers, keyed by question id.",
                },
            },
            "required": ["inquiry_id"],
            "additionalProperties": False,
        },
        output_schema=ANSWER_RESULT_SCHEMA,
    ),
)


@dataclass(frozen=True, slots=True)
class InquiryResult:
    """``{status, answer, inquiry_id, waited_s}`` plus the guidance text for the model."""

    status: InquiryStatus
    answer: str | Answers | None
    inquiry_id: str
    waited_s: float
    detail: str | None = None  # a decline's reason: in the text, not the answer
    judge: str | None = None  # ``judge:NAME`` when the fallback judge answered, not a human

    def to_tool_result(self) -> types.CallToolResult:
        structured = {
            "status": self.status,
            "answer": self.answer,
            "inquiry_id": self.inquiry_id,
            "waited_s": round(self.waited_s, 3),
        }
        if self.judge is not None:
            structured["answered_by"] = self.judge
        answer = json.dumps(self.answer) if isinstance(self.answer, dict) else self.answer
        text = inquiry_guidance(
            self.status, answer or self.detail, self.waited_s, self.inquiry_id, judge=self.judge
        )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=structured
        )


def status_of(req: ApprovalRequest) -> tuple[InquiryStatus, str | Answers | None, str | None]:
    """(status, answer, detail) of an inquiry request; a form's answer is keyed by id."""
    if req.pending:
        return "pending", None, None
    call = req.calls[0]
    if call.resolution == "responded":
        if req.inquiry is not None and req.inquiry.is_form:
            return "answered", dict(call.answers or {}), None
        return "answered", call.message, None
    if call.resolution == "expired":
        return "expired", None, None
    if call.resolution == "cancelled":
        return "cancelled", None, call.message
    if call.resolved_by in ("non-interactive", "yolo"):
        return "unavailable", None, None
    return "declined", None, call.message


def result_of(req: ApprovalRequest) -> types.CallToolResult:
    status, answer, detail = status_of(req)
    end = req.resolved_at or utcnow()
    waited = max(0.0, (end - req.created_at).total_seconds())
    by = req.calls[0].resolved_by if status == "answered" else None
    judge = by if is_judge(by) else None
    return InquiryResult(status, answer, req.id, waited, detail, judge).to_tool_result()
