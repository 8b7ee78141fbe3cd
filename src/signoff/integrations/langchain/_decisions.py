"""A resume value, checked and recorded *inside* LangGraph's validation step.

LangGraph saves a resume value only after ``interrupt()`` returns. LangChain checks the
decisions afterwards, so a bad answer is saved first and replayed on every later resume
(the thread is "poisoned"). Here the whole check — count, types, tool-call ids, edits
(same tool, editable arguments, the tool's schema, the policy), who decides, quorum — runs
as the interrupt's ``response_schema`` validator, and the decision is recorded in the
signoff store there too, atomically. If anything is wrong, the validator raises,
LangGraph saves nothing, the signoff request stays pending, and the same interrupt can be
answered again.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler, TypeAdapter, ValidationError
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from signoff.gate import Gate
from signoff.integrations.langchain._ids import stored
from signoff.integrations.langchain.shapes import RESUME_JSON_SCHEMA
from signoff.model import (
    AlreadyDecided,
    ApprovalRequest,
    Decision,
    DecisionError,
    DecisionRecord,
    NotAuthorized,
    SignoffError,
    utcnow,
)
from signoff.model.resolution import apply_decisions

CHANNEL = "langchain"
RunIo = Callable[[Coroutine[Any, Any, Any]], Any]


class _Refused(ValueError):
    """Carries the signoff error through pydantic, which only reports ValueErrors."""

    def __init__(self, error: SignoffError) -> None:
        self.error = error
        super().__init__(str(error))


@dataclass(frozen=True, slots=True)
class Checked:
    """A resume value that passed every check, to be recorded by the (async) caller."""

    decisions: list[Decision]
    approver: str


Answer = ApprovalRequest | Checked

_RECORDER: ContextVar[Callable[[Any], Answer] | None] = ContextVar(
    "signoff_langchain_recorder", default=None
)


class ResumeValue:
    """The interrupt's ``response_schema``. One constant type (LangGraph builds a pydantic
    adapter for it on every ``interrupt()``); the request being answered is set around the
    call with :func:`answering`."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_plain_validator_function(_validate)

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return RESUME_JSON_SCHEMA


def _prebuilt(cls: type[ResumeValue]) -> None:
    """Store the type's pydantic schema, validator and serializer on it once: LangGraph's
    ``TypeAdapter(ResumeValue)`` in every ``interrupt()`` then takes them instead of
    generating them again (~0.1 ms per pause and per resume)."""
    adapter = TypeAdapter(cls)
    cls.__pydantic_core_schema__ = adapter.core_schema  # type: ignore[attr-defined]
    cls.__pydantic_validator__ = adapter.validator  # type: ignore[attr-defined]
    cls.__pydantic_serializer__ = adapter.serializer  # type: ignore[attr-defined]


def _validate(value: Any) -> Answer:
    record = _RECORDER.get()
    if record is None:
        raise _Refused(SignoffError("no signoff request is waiting for this resume value"))
    return record(value)


@contextmanager
def answering(
    gate: Gate, req: ApprovalRequest, approver: str, prefix: str, run_io: RunIo | None
) -> Iterator[None]:
    """While inside, a resume value given to ``interrupt()`` is checked — and, with
    ``run_io`` (a sync agent), recorded. An async agent must not block its event loop on
    the store, so there ``interrupt()`` returns :class:`Checked` and the caller records it
    with :func:`record_checked`. ``prefix`` turns LangChain's tool-call ids into stored ones.
    """

    def record(value: Any) -> Answer:
        try:
            checked = _check(gate, req, value, approver, prefix)
            if run_io is None:
                return checked
            stored: ApprovalRequest = run_io(record_checked(gate, req, checked))
            return stored
        except SignoffError as exc:
            raise _Refused(explained(exc, req)) from None
        except Exception as exc:  # never let a store error be taken for a saved answer
            raise _Refused(SignoffError(f"the decision could not be recorded: {exc}")) from None

    token = _RECORDER.set(record)
    try:
        yield
    finally:
        _RECORDER.reset(token)


def unwrap(exc: ValidationError) -> SignoffError | None:
    """The signoff error behind a refused resume value, if that is what ``exc`` is."""
    for error in exc.errors():
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, _Refused):
            return cause.error
    return None


def _check(gate: Gate, req: ApprovalRequest, value: Any, approver: str, prefix: str) -> Checked:
    """Every check a decision gets, without touching the store."""
    decisions = parse_resume(value, req, prefix)
    people = gate.policy.people
    if people and approver not in people:
        raise NotAuthorized(
            f"{approver!r} is not in the people: directory of this policy", field="approver"
        )
    records = gate.validate_decisions(req, decisions, approver=approver, channel=CHANNEL)
    dry = apply_decisions(req, records, approver_roles=gate.policy.roles_of(approver), now=utcnow())
    if dry.request.pending:
        raise DecisionError(_still_open(dry.request, approver), field="decisions")
    return Checked([_as_decision(r) for r in records], approver)


async def record_checked(gate: Gate, req: ApprovalRequest, checked: Checked) -> ApprovalRequest:
    """Store checked decisions (the store refuses them if someone decided first)."""
    return await gate.adecide(req.id, checked.decisions, approver=checked.approver, channel=CHANNEL)


def parse_resume(value: Any, req: ApprovalRequest, prefix: str = "") -> list[Any]:
    """``{"decisions": [...]}`` (positional or with tool_call_id) or ``{"decisions": {id: d}}``.

    Ids are LangChain's tool-call ids or the stored (turn-scoped) ones; ``prefix`` maps the
    former to the latter."""
    return [_stored_id(d, prefix, req) for d in _decision_list(value, req)]


def _stored_id(decision: Any, prefix: str, req: ApprovalRequest) -> Any:
    if not isinstance(decision, Mapping) or not isinstance(decision.get("tool_call_id"), str):
        return decision
    known = {c.tool_call_id for c in req.calls}
    return {**decision, "tool_call_id": stored(prefix, decision["tool_call_id"], known)}


def _decision_list(value: Any, req: ApprovalRequest) -> list[Any]:
    if not isinstance(value, Mapping) or "decisions" not in value:
        raise DecisionError(
            'resume with {"decisions": [...]} (one per action request, in order) or '
            '{"decisions": {tool_call_id: decision}}',
            field="resume",
        )
    request_id = value.get("request_id")
    if request_id is not None and request_id != req.id:
        raise DecisionError(
            f"this resume value is for request {request_id}, but {req.id} is waiting",
            field="request_id",
        )
    raw = value["decisions"]
    if isinstance(raw, Mapping):
        keyed = []
        for call_id, decision in raw.items():
            if not isinstance(decision, Mapping):
                raise DecisionError("each decision is an object", field=f"decisions.{call_id}")
            keyed.append({**decision, "tool_call_id": call_id})
        return keyed
    if isinstance(raw, list | tuple):
        return list(raw)
    raise DecisionError("decisions is a list or an object keyed by tool-call id", field="decisions")


def _as_decision(record: DecisionRecord) -> Decision:
    return Decision(
        tool_call_id=record.tool_call_id,
        type=record.type,
        edited_action=record.edited_action,
        message=record.message,
        scope=record.scope,
    )


def _still_open(req: ApprovalRequest, approver: str) -> str:
    open_calls = [c for c in req.calls if c.resolution is None]
    parts = [
        f"{req.action_request(c.tool_call_id).name} ({c.tool_call_id}) needs {c.quorum} "
        f"approvals, has {len(c.approvals)}"
        for c in open_calls
    ]
    return (
        f"{approver}'s decision does not settle request {req.id}: "
        + "; ".join(parts)
        + ". "
        + _elsewhere(req)
    )


def _elsewhere(req: ApprovalRequest) -> str:
    return (
        f"Decide it through signoff (`signoff approve {req.id} --as <person>`, the web "
        "inbox or a channel), then resume with "
        "signoff.integrations.langchain.resume(agent, config)."
    )


def explained(exc: SignoffError, req: ApprovalRequest) -> SignoffError:
    """The error with what to do next, keeping its type (and field)."""
    if isinstance(exc, NotAuthorized):
        return NotAuthorized(f"{exc.message}. {_elsewhere(req)}", field=exc.field)
    if isinstance(exc, AlreadyDecided):
        return AlreadyDecided(
            f"{exc}. Resume with signoff.integrations.langchain.resume(agent, config) to "
            "continue with that decision.",
            request_id=exc.request_id,
            by=exc.by,
            at=exc.at,
            outcome=exc.outcome,
        )
    return exc


_prebuilt(ResumeValue)  # after _validate, which its schema names
