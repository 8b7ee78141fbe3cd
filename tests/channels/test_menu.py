"""The terminal menu's keys and decision builders (shared by watch, console and demo)."""

from __future__ import annotations

import json
import textwrap

import pytest

from signoff import CallContext, Gate, Policy, Principal, ToolCall
from signoff.channels import menu
from signoff.model import ApprovalRequest, DecisionError
from signoff.store import MemoryStore

POLICY = """
version: 1
people:
  erin: {roles: [dev]}
  bob:  {roles: [finance]}
tools:
  transfer:
    default: require_approval
    approvers: {roles: [finance]}
    allowed_decisions: [approve, edit, reject]
    editable_args: [amount]
  pay_many:
    default: require_approval
    approvers: {roles: [finance], quorum: 2}
  deploy:
    default: require_approval
    approvers: {users: [erin]}
    forbid_self_approval: false
  rotate_keys:
    default: require_approval
    approvers: {roles: [finance]}
    allow_thread_approval: false
"""


def request(tool: str, args: dict[str, object]) -> ApprovalRequest:
    with Gate(Policy.from_yaml(textwrap.dedent(POLICY)), MemoryStore()) as gate:
        ctx = CallContext(principal=Principal("erin"), agent="bot", thread="t-1")
        req = gate.submit([ToolCall(tool, args)], ctx).request
    assert req is not None
    return req


def test_keys_follow_the_deepagents_menu() -> None:
    assert [menu.item_for(k).action for k in ("y", "1", "n", "2", "a", "3")] == [  # type: ignore[union-attr]
        "approve", "approve", "reject", "reject", "grant", "grant",
    ]  # fmt: skip
    assert menu.item_for("enter") == menu.item_for("o") and menu.item_for("x") is None


def test_offered_follows_the_review_config() -> None:
    transfer = request("transfer", {"amount": 5, "to": "ACME"})
    call = transfer.calls[0].tool_call_id
    assert [i.action for i in menu.offered(transfer, call)] == [
        "approve", "reject", "grant", "edit", "open",
    ]  # fmt: skip
    many = request("pay_many", {"n": 2})
    assert "grant" not in [i.action for i in menu.offered(many, many.calls[0].tool_call_id)]
    rotate = request("rotate_keys", {})  # allow_thread_approval: false, nothing editable
    assert [i.action for i in menu.offered(rotate, rotate.calls[0].tool_call_id)] == [
        "approve", "reject", "open",
    ]  # fmt: skip


def test_edit_refuses_a_change_to_a_fixed_argument_naming_it() -> None:
    req = request("transfer", {"amount": 5, "to": "ACME"})
    call = req.calls[0].tool_call_id
    assert menu.edit(req, call, {"amount": 3, "to": "ACME"})["edited_action"]["args"] == {
        "amount": 3, "to": "ACME",
    }  # fmt: skip
    with pytest.raises(DecisionError) as caught:
        menu.edit(req, call, {"amount": 3, "to": "EVIL"})
    assert caught.value.field == "args.to" and "to may not be edited" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "says"),
    [("{", "not valid JSON"), ("[1]", "one JSON object"), ('"x"', "one JSON object")],
)
def test_editor_text_must_be_one_json_object(text: str, says: str) -> None:
    with pytest.raises(DecisionError, match=says):
        menu.parse_args_json(text)


def test_a_rejection_and_an_answer_need_text() -> None:
    with pytest.raises(DecisionError, match="needs a reason"):
        menu.reject("c1", "   ")
    with pytest.raises(DecisionError, match="empty answer"):
        menu.respond("c1", "")


def test_who_may_decide() -> None:
    policy = Policy.from_yaml(textwrap.dedent(POLICY))
    deploy, transfer = request("deploy", {}), request("transfer", {"amount": 5, "to": "A"})
    assert menu.principal_may_decide(policy, deploy, "erin")
    assert not menu.principal_may_decide(policy, transfer, "erin")  # not in finance
    assert menu.needs_person(transfer, "bob", ["finance"]) == [transfer.calls[0].tool_call_id]
    assert menu.needs_person(transfer, "erin", ["dev"]) == []
    assert menu.waiting_for(transfer).startswith("waiting for role finance (0 of 1)… deadline at ")


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("50\u202e000", '"50\\u202e000"'),  # bidi override
        ("a\u200bb\x7f", '"a\\u200bb\\u007f"'),  # zero-width space, DEL
        ("tag\U000e0041", '"tag\\udb40\\udc41"'),  # a tag character: a surrogate pair
        ({"k\u2066": ["\x1b[2J"]}, '{"k\\u2066": ["\\u001b[2J"]}'),  # keys, nested, ESC
        ("café 👍 ❤️‍🔥", '"café 👍 ❤️‍🔥"'),  # readable text and emoji sequences stay
    ],
)
def test_edited_json_shows_hidden_characters_as_escapes(value: object, shown: str) -> None:
    from signoff.model.text import editable_json

    assert editable_json(value) == shown
    assert json.loads(shown) == value


def test_edited_json_with_indent_keeps_its_line_breaks() -> None:
    from signoff.model.text import editable_json

    text = editable_json({"a": "x\u202e", "b": [1]}, indent=2)
    assert text == '{\n  "a": "x\\u202e",\n  "b": [\n    1\n  ]\n}'
    assert json.loads(text) == {"a": "x\u202e", "b": [1]}
