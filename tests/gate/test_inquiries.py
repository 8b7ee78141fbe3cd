"""Inquiries through the gate: one question or a form, and every answer checked against the
choices (whatever surface sends it) — a refused answer names the field and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from signoff import Gate
from signoff.model import ApprovalRequest, DecisionError, InvalidInput
from signoff.model.inquiries import answer_text, make_inquiry

FORM: list[dict[str, Any]] = [
    {"id": "region", "question": "Which **region**?", "choices": ["eu", "us"]},
    {
        "id": "features",
        "question": "Which features?",
        "choices": ["logs", "metrics", "traces"],
        "multiple": True,
        "default_answer": ["logs"],
    },
    {"id": "note", "question": "Anything else?", "choices": ["no"], "allow_other": True},
]


async def _ask(gate: Gate, question: str | None = None, **kw: Any) -> ApprovalRequest:
    req = await gate.aask(question, wait=False, ctx=gate.make_context("erin"), **kw)
    assert isinstance(req, ApprovalRequest)
    return req


async def _respond(gate: Gate, req: ApprovalRequest, **decision: Any) -> ApprovalRequest:
    return await gate.adecide(req.id, [{"type": "respond", **decision}], approver="alice")


async def test_an_answer_outside_the_choices_is_refused_and_the_inquiry_stays_pending(
    gate: Gate,
) -> None:
    req = await _ask(gate, "Which region?", choices=["eu", "us"])
    with pytest.raises(DecisionError) as info:
        await _respond(gate, req, message="mars")
    assert info.value.field == "decisions[0].message"
    assert "not one of the choices" in str(info.value)
    assert (await gate.get(req.id)).pending
    done = await _respond(gate, req, message=" us ")
    assert done.calls[0].message == "us"


async def test_allow_other_accepts_a_free_answer(gate: Gate) -> None:
    req = await _ask(gate, "Which region?", choices=["eu", "us"], allow_other=True)
    done = await _respond(gate, req, message="ap-south")
    assert done.calls[0].resolution == "responded" and done.calls[0].message == "ap-south"


async def test_a_question_without_choices_takes_any_answer(gate: Gate) -> None:
    req = await _ask(gate, "Why?")
    assert (await _respond(gate, req, message="because")).calls[0].message == "because"


async def test_a_form_is_answered_with_an_object_keyed_by_question_id(gate: Gate) -> None:
    req = await _ask(gate, questions=FORM, format="markdown")
    assert req.inquiry is not None and req.inquiry.is_form
    assert req.inquiry.question == "Which **region**?" and req.inquiry.format == "markdown"
    answers = {"region": "eu", "features": ["metrics", "traces", "metrics"], "note": "ship it"}
    done = await _respond(gate, req, answers=answers)
    assert done.calls[0].answers == {
        "region": "eu",
        "features": ["metrics", "traces"],
        "note": "ship it",
    }
    assert answer_text(done.calls[0].answers, None) == (
        "region: eu; features: metrics, traces; note: ship it"
    )


async def test_gate_ask_returns_the_form_answers(gate: Gate) -> None:
    import anyio

    async def answer() -> None:
        while not (pending := await gate.alist(status="pending")):
            await anyio.sleep(0.01)
        await _respond(gate, pending[0], answers={"region": "us", "features": [], "note": "no"})

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer)
        result = await gate.aask(questions=FORM, ctx=gate.make_context("erin"))
    assert result == {"region": "us", "features": [], "note": "no"}


@pytest.mark.parametrize(
    ("decision", "field"),
    [
        ({"answers": {"region": "mars", "note": "x"}}, "decisions[0].answers.region"),
        ({"answers": {"region": "eu", "features": ["logs", "dns"], "note": "x"}}, None),
        ({"answers": {"region": "eu", "features": "dns", "note": "x"}}, None),
        ({"answers": {"region": ["eu"], "note": "x"}}, "decisions[0].answers.region"),
        ({"answers": {"region": "eu"}}, "decisions[0].answers.note"),
        ({"answers": {"region": "eu", "note": "x", "extra": "y"}}, "decisions[0].answers.extra"),
        ({"answers": {"region": "eu", "note": "  "}}, "decisions[0].answers.note"),
        ({"message": "eu"}, "decisions[0].answers"),
        ({"answers": ["eu"]}, "decisions[0].answers"),
    ],
)
async def test_a_bad_form_answer_names_the_field_and_changes_nothing(
    gate: Gate, decision: dict[str, Any], field: str | None
) -> None:
    req = await _ask(gate, questions=FORM)
    with pytest.raises(DecisionError) as info:
        await _respond(gate, req, **decision)
    assert info.value.field == (field or "decisions[0].answers.features")
    after = await gate.get(req.id)
    assert after.pending and after.decisions == []


async def test_a_one_question_form_takes_its_answer_in_message_too(gate: Gate) -> None:
    req = await _ask(gate, questions=[{"id": "ok", "question": "Ship?", "choices": ["y", "n"]}])
    done = await _respond(gate, req, message="y")
    assert done.calls[0].answers == {"ok": "y"} and done.calls[0].message is None


async def test_the_single_form_accepts_answers_keyed_answer(gate: Gate) -> None:
    req = await _ask(gate, "Ship?", choices=["y", "n"])
    done = await _respond(gate, req, answers={"answer": "n"})
    assert done.calls[0].message == "n" and done.calls[0].answers is None


async def test_answers_on_a_tool_call_or_other_decision_types_are_refused(gate: Gate) -> None:
    req = await _ask(gate, "Ship?")
    with pytest.raises(DecisionError) as info:
        await gate.adecide(
            req.id, [{"type": "reject", "answers": {"answer": "x"}}], approver="alice"
        )
    assert info.value.field == "decisions[0].answers"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"question": "  "}, "question"),
        ({"question": "Q", "choices": ["a"], "default_answer": "b"}, "default_answer"),
        ({"questions": []}, "questions"),
        ({"questions": [{"id": "a b", "question": "Q"}]}, "questions[0].id"),
        ({"questions": [{"id": "a", "question": "Q"}, {"id": "a", "question": "R"}]}, None),
        ({"questions": [{"id": "a", "question": "Q", "multiple": True}]}, "questions[0].multiple"),
        ({"questions": [{"id": "a", "question": "Q", "choices": ["x", "x"]}]}, None),
        ({"questions": [{"id": "a", "question": "Q", "color": "red"}]}, "questions[0].color"),
        ({"questions": [{"id": "a"}]}, "questions[0].question"),
        ({"questions": [{"id": "a", "question": "Q"}], "choices": ["x"]}, "choices"),
        ({"question": "Q", "format": "html"}, "format"),
    ],
)
def test_a_bad_inquiry_names_the_field(kwargs: dict[str, Any], field: str | None) -> None:
    with pytest.raises(InvalidInput) as info:
        make_inquiry(**kwargs)
    expected = field or ("questions[1].id" if "R" in str(kwargs) else "questions[0].choices")
    assert info.value.field == expected


async def test_a_bad_inquiry_stores_nothing(gate: Gate) -> None:
    with pytest.raises(InvalidInput):
        await _ask(gate, questions=[{"id": "a", "question": "Q", "multiple": True}])
    assert await gate.alist() == []
