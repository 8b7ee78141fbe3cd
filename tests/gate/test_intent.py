"""Intent checks through the gate (issue #16 part 1): a judge compares the call with what
the user asked, and its answer can only make the verdict stricter."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from signoff import Denied, Gate, Policy, PolicyError, ToolCall
from signoff.store import AuditQuery
from tests.gate import intent_judges
from tests.gate.snapshots import SnapshotCheckingStore

POLICY = """
version: 1
defaults: {unknown_tool: allow}
people:
  alice: {roles: [dba]}
  erin: {roles: []}
judges:
  rules: {kind: python, function: "tests.gate.intent_judges:scripted", timeout: 5s}
tools:
  read_table:
    default: allow
    intent: {judge: rules}
  drop_table:
    default: allow
    intent: {judge: rules, on_mismatch: deny}
  delete_row:
    default: require_approval
    approvers: {roles: [dba]}
    intent: {judge: rules, on_mismatch: deny, on_unclear: keep}
  plain:
    default: allow
"""


@pytest.fixture
def gate() -> Iterator[Gate]:
    intent_judges.asked.clear()
    intent_judges.answers.clear()
    g = Gate(Policy.from_yaml(textwrap.dedent(POLICY)), SnapshotCheckingStore())
    yield g
    g.close()


def audit(gate: Gate, **filters: Any) -> list[Any]:
    async def read() -> list[Any]:
        await gate.store.flush_audit()
        return list(await gate.store.read_audit(AuditQuery(**filters)))

    return gate._portal.run(read())


def say(user_request: str, verdict: str, reason: str = "judged") -> None:
    intent_judges.answers[user_request] = {"verdict": verdict, "reason": reason}


def test_a_tool_without_intent_is_decided_synchronously_as_before(gate: Gate) -> None:
    verdict = gate.check(ToolCall("plain", {}), gate.make_context("erin", user_request="x"))
    assert verdict.allowed and not verdict.judge_pending
    assert intent_judges.asked == []


def test_check_reports_a_pending_judge_and_a_pending_allow_is_not_allowed(gate: Gate) -> None:
    ctx = gate.make_context("erin", user_request="show the users table")
    verdict = gate.check(ToolCall("read_table", {"name": "users"}), ctx)
    assert verdict.judge_pending and not verdict.allowed  # fail closed until judged
    assert intent_judges.asked == []
    settled = gate.judge(ToolCall("read_table", {"name": "users"}), ctx, verdict)
    assert settled.allowed and settled.judgement is not None
    assert settled.judgement.verdict == "consistent"


def test_consistent_runs_and_both_the_check_and_the_allow_are_audited(gate: Gate) -> None:
    ran: list[str] = []

    @gate.guard
    def read_table(name: str) -> str:
        ran.append(name)
        return "rows"

    with gate.context("erin", user_request="show the users table", reasoning="to list them"):
        assert read_table(name="users") == "rows"
    assert ran == ["users"]
    (request,) = intent_judges.asked
    assert (request.tool, request.user_request, request.reasoning) == (
        "read_table",
        "show the users table",
        "to list them",
    )
    events = [(r.event, r.data.get("verdict")) for r in audit(gate, tool="read_table")]
    assert events == [("intent_checked", "consistent"), ("allowed", None)]


def test_a_mismatch_denies_where_the_policy_says_so(gate: Gate) -> None:
    say("show the users table", "mismatch", "the user asked to read, this drops a table")

    @gate.guard
    def drop_table(name: str) -> str:
        raise AssertionError("must not run")

    with gate.context("erin", user_request="show the users table"), pytest.raises(Denied) as denied:
        drop_table(name="users")
    assert denied.value.verdict.rule == "drop_table.default.intent"
    assert "model output" in str(denied.value) and "drops a table" in str(denied.value)


def test_a_mismatch_on_an_allowed_tool_asks_a_human_who_sees_the_judge(gate: Gate) -> None:
    say("show the users table", "mismatch", "<b>reads</b> \u202eanother table")
    ctx = gate.make_context("erin", user_request="show the users table")
    sub = gate.submit([ToolCall("read_table", {"name": "salaries"}, id="c1")], ctx)
    req = sub.request
    assert req is not None and req.pending
    (action,) = req.action_requests
    assert action.rule == "read_table.default.intent"
    assert action.intent is not None and action.intent["verdict"] == "mismatch"
    assert action.intent["judge"] == "rules"
    req = gate.decide(req.id, [{"type": "approve"}], approver="alice")
    assert req.calls[0].resolution == "approved"


def test_the_judge_cannot_loosen_a_deny_or_an_approval(gate: Gate) -> None:
    ctx = gate.make_context("erin", user_request="tidy up")
    sub = gate.submit([ToolCall("delete_row", {"id": 7}, id="d1")], ctx)
    assert sub.request is not None and sub.request.pending  # consistent: the human still decides
    say("remove everything", "unclear")  # on_unclear: keep → still a question
    sub = gate.submit(
        [ToolCall("delete_row", {"id": 8}, id="d2")],
        gate.make_context("erin", user_request="remove everything"),
    )
    assert sub.request is not None and sub.request.pending
    say("only look", "mismatch")  # on_mismatch: deny → no human is asked
    sub = gate.submit(
        [ToolCall("delete_row", {"id": 9}, id="d3")],
        gate.make_context("erin", user_request="only look"),
    )
    assert sub.request is None and sub.verdict_for("d3").denied


def test_a_failing_judge_never_allows(gate: Gate) -> None:
    intent_judges.answers["boom"] = RuntimeError("model endpoint down")
    ctx = gate.make_context("erin", user_request="boom")
    verdict = gate.judge(
        ToolCall("read_table", {}), ctx, gate.check(ToolCall("read_table", {}), ctx)
    )
    assert verdict.needs_approval  # on_error defaults to require_approval
    assert verdict.judgement is not None and verdict.judgement.verdict == "error"
    assert "model endpoint down" in verdict.judgement.reason
    intent_judges.answers["bad"] = {"verdict": "fine", "reason": "x"}
    ctx = gate.make_context("erin", user_request="bad")
    verdict = gate.judge(
        ToolCall("read_table", {}), ctx, gate.check(ToolCall("read_table", {}), ctx)
    )
    assert verdict.needs_approval


def test_answers_are_cached_per_request_and_args_and_secrets_never_reach_the_judge(
    gate: Gate,
) -> None:
    ctx = gate.make_context("erin", user_request="show it")
    call = ToolCall("read_table", {"name": "users", "api_key": "sk-live-123"})
    for _ in range(3):
        verdict = gate.judge(call, ctx, gate.check(call, ctx))
        assert verdict.allowed
    (request,) = intent_judges.asked  # asked once; twice more from the cache
    assert request.args["api_key"] != "sk-live-123" and request.args["name"] == "users"
    assert gate.intents.cache_hits == 2
    cached = [
        r.data["cached"] for r in audit(gate, tool="read_table") if r.event == "intent_checked"
    ]
    assert cached == [False, True, True]
    other = ToolCall("read_table", {"name": "orders", "api_key": "sk-live-123"})
    gate.judge(other, ctx, gate.check(other, ctx))
    assert len(intent_judges.asked) == 2  # other arguments: asked again


def test_a_standing_grant_does_not_skip_the_judge(gate: Gate) -> None:
    ctx = gate.make_context("erin", user_request="tidy", thread="t1")
    sub = gate.submit([ToolCall("delete_row", {"id": 1}, id="g1")], ctx)
    assert sub.request is not None
    gate.decide(sub.request.id, [{"type": "approve", "scope": "thread"}], approver="alice")
    say("now drop it all", "mismatch")
    ctx = gate.make_context("erin", user_request="now drop it all", thread="t1")
    verdict = gate.judge(
        ToolCall("delete_row", {"id": 2}), ctx, gate.check(ToolCall("delete_row", {"id": 2}), ctx)
    )
    assert verdict.denied  # the grant stood in for the human, not for the judge


async def test_acheck_runs_the_judge(gate: Gate) -> None:
    say("look only", "mismatch")
    ctx = gate.make_context("erin", user_request="look only")
    verdict = await gate.acheck(ToolCall("drop_table", {"name": "x"}), ctx)
    assert verdict.denied


@pytest.mark.parametrize(
    ("intent", "message"),
    [
        ("{judge: nobody}", "judges: does not define"),
        ("{judge: rules, on_error: keep}", "on_error cannot be `keep`"),
        ("{judge: rules, on_mismatch: allow}", "intent.on_mismatch is one of"),
        ("{judge: rules, when: x}", "unknown intent key"),
        ("[rules]", "intent is a mapping"),
    ],
)
def test_a_bad_intent_fails_at_load_with_its_path(intent: str, message: str) -> None:
    text = textwrap.dedent(POLICY).replace("intent: {judge: rules}", f"intent: {intent}")
    with pytest.raises(PolicyError) as error:
        Policy.from_yaml(text)
    assert message in str(error.value)
    assert "tools.read_table.intent" in str(error.value)
