"""``/v1/inquiries`` forms and answers over the API: choices bind unless ``allow_other``, a
refused answer is a 422 naming the field and the inquiry stays pending."""

from __future__ import annotations

from typing import Any

from tests.server.conftest import Server

FORM: list[dict[str, Any]] = [
    {"id": "region", "question": "Which **region**?", "choices": ["eu", "us"]},
    {
        "id": "features",
        "question": "Which features?",
        "choices": ["logs", "metrics"],
        "multiple": True,
    },
    {"id": "why", "question": "Why?"},
]


def _ask(server: Server, **body: Any) -> dict[str, Any]:
    body.setdefault("context", {"principal": {"id": "frank"}, "thread": "t-form"})
    r = server.client("bot").post("/v1/inquiries", json=body)
    assert r.status_code == 201, r.text
    return dict(r.json())


def _answer(server: Server, rid: str, **decision: Any) -> Any:
    return server.client("dave").post(
        f"/v1/requests/{rid}/decisions", json=[{"type": "respond", **decision}]
    )


def test_a_form_is_asked_and_answered_with_an_object_keyed_by_question_id(
    server: Server,
) -> None:
    body = _ask(server, questions=FORM, format="markdown")
    assert body["inquiry"]["format"] == "markdown"
    assert [q["id"] for q in body["inquiry"]["questions"]] == ["region", "features", "why"]
    answers = {"region": "us", "features": ["logs"], "why": "latency"}
    r = _answer(server, body["id"], answers=answers)
    assert r.status_code == 200
    assert r.json()["resolution"][0]["answers"] == answers
    assert r.json()["calls"][0]["answers"] == answers


def test_the_single_question_form_keeps_its_wire_shape(server: Server) -> None:
    body = _ask(server, question="Which region?", choices=["eu", "us"])
    assert body["inquiry"] == {
        "question": "Which region?",
        "choices": ["eu", "us"],
        "default_answer": None,
    }
    r = _answer(server, body["id"], message="us")
    assert "answers" not in r.json()["resolution"][0]


def test_an_answer_outside_the_choices_is_422_naming_the_field_and_stays_pending(
    server: Server,
) -> None:
    body = _ask(server, questions=FORM)
    bad = {"region": "<script>alert(1)</script>", "features": [], "why": "x"}
    r = _answer(server, body["id"], answers=bad)
    assert r.status_code == 422
    assert r.json()["field"] == "decisions[0].answers.region"
    assert "not one of the choices" in r.json()["message"]
    r = _answer(server, body["id"], answers={"region": "eu", "features": ["dns"], "why": "x"})
    assert r.json()["field"] == "decisions[0].answers.features"
    r = _answer(server, body["id"], message="eu")
    assert r.json()["field"] == "decisions[0].answers"
    after = server.client("dave").get(f"/v1/requests/{body['id']}").json()
    assert after["status"] == "pending" and after["decisions"] == []


def test_single_question_choices_bind_unless_allow_other(server: Server) -> None:
    strict = _ask(server, question="Region?", choices=["eu", "us"])
    r = _answer(server, strict["id"], message="mars")
    assert r.status_code == 422 and r.json()["field"] == "decisions[0].message"
    free = _ask(server, question="Region?", choices=["eu", "us"], allow_other=True)
    assert free["inquiry"]["allow_other"] is True
    assert _answer(server, free["id"], message="mars").status_code == 200


def test_a_bad_form_is_422_naming_the_field_and_stores_nothing(server: Server) -> None:
    bad = [{"id": "a", "question": "Q", "multiple": True}]
    r = server.client("bot").post(
        "/v1/inquiries", json={"questions": bad, "context": {"thread": "t-bad"}}
    )
    assert r.status_code == 422 and r.json()["field"] == "questions[0].multiple"
    listed = server.client("dave").get("/v1/requests", params={"kind": "inquiry"}).json()
    assert listed["requests"] == []
