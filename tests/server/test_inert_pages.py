"""The web inbox shows agent text inert (bidi overrides and controls visible, markup
escaped) and, after an edit, the arguments that will run with what the edit changed."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from markupsafe import escape

from signoff.model import Action, ApprovalRequest
from signoff.model.text import inert
from signoff.server.identity import Identity
from signoff.server.inbox import _row
from signoff.server.pages import make_templates
from signoff.server.presenter import field_text, parse_edit, present
from signoff.store import MemoryStore
from tests.model.inert_helpers import hidden_chars, hostile_text
from tests.server.conftest import POLICY, Server, start_server
from tests.server.test_inbox_forms import csrf_of, form_post, sign_in
from tests.store.factories import make_request

QUORUM_EDIT = (
    POLICY
    + """
  big_payment:
    default: require_approval
    approvers: {roles: [finance], quorum: 2}
    allowed_decisions: [approve, edit, reject]
    editable_args: [amount]
"""
)


@pytest.fixture
def quorum_server() -> Iterator[Server]:
    srv = start_server(MemoryStore(), QUORUM_EDIT)
    yield srv
    srv.close()


def page_of(server: Server, who: str, rid: str) -> str:
    page = sign_in(server, who).get(f"/requests/{rid}")
    assert page.status_code == 200, page.text
    return page.text


def pre_args(page: str) -> list[str]:
    """The argument blocks, unescaped: first what runs, then (after an edit) the original."""
    return [html.unescape(m) for m in re.findall(r'<pre class="args"[^>]*>(.*?)</pre>', page, re.S)]


def field_value(page: str, name: str) -> str:
    match = re.search(rf'name="arg\.{re.escape(name)}" value="([^"]*)"', page)
    assert match, name
    return html.unescape(match.group(1))


# ---------------------------------------------------------------- repros
def test_a_right_to_left_override_is_visible_on_the_request_page_and_inbox(
    server: Server,
) -> None:
    args = {"amount": 50_000, "to": "ACME\u202eexe.txt", "memo": "\x1b[2Jhi [/] <b>"}
    r = server.submit(
        [{"id": "call_1", "name": "transfer_funds", "args": args}],
        thread="t\u202e1",
        user_request="pay\u202e ACME",
    )
    assert r.status_code == 201, r.text
    rid = r.json()["id"]
    page = page_of(server, "bob", rid)
    assert "\u202e" not in page and "\x1b" not in page
    assert "ACME&lt;U+202E&gt;exe.txt" in page and "pay&lt;U+202E&gt; ACME" in page
    assert "<dd>t&lt;U+202E&gt;1</dd>" in page
    assert '"memo": "\\u001b[2Jhi [/] <b>"' in pre_args(page)[0]  # brackets literal
    inbox = sign_in(server, "bob").get("/inbox").text
    assert "\u202e" not in inbox and "thread t&lt;U+202E&gt;1" in inbox


def test_after_an_edit_the_page_shows_what_runs_and_the_change(server: Server) -> None:
    rid = server.pending(amount=50_000)
    edit = {"name": "transfer_funds", "args": {"amount": 20_000, "to": "ACME"}}
    decided = server.client("bob").post(
        f"/v1/requests/{rid}/decisions",
        json={"decisions": [{"tool_call_id": "call_1", "type": "edit", "edited_action": edit}]},
    )
    assert decided.status_code == 200, decided.text
    page = page_of(server, "alice", rid)
    runs, original = pre_args(page)
    assert json.loads(runs) == {"amount": 20000, "to": "ACME"}
    assert json.loads(original) == {"amount": 50000, "to": "ACME"}
    assert "Edited — these arguments will run" in page
    assert "<td><del>50000</del></td><td><ins>20000</ins></td>" in page
    assert "(as first requested)" in page  # the description was written for 50000


def test_a_second_approver_sees_and_edits_the_edited_call(quorum_server: Server) -> None:
    server = quorum_server
    r = server.submit([{"id": "call_1", "name": "big_payment", "args": {"amount": 900, "to": "X"}}])
    rid = r.json()["id"]
    bob = sign_in(server, "bob")
    data = {"tool_call_id": "call_1", "type": "edit", "arg.amount": "500", "csrf": csrf_of(bob)}
    assert form_post(bob, server, f"/requests/{rid}/decide", data).status_code == 303
    carol = sign_in(server, "carol")
    page = carol.get(f"/requests/{rid}").text
    assert json.loads(pre_args(page)[0]) == {"amount": 500, "to": "X"}  # still pending
    assert field_value(page, "amount") == "500"  # her edit starts from what would run
    approve = {"tool_call_id": "call_1", "type": "approve", "csrf": csrf_of(carol)}
    assert form_post(carol, server, f"/requests/{rid}/decide", approve).status_code == 303
    call = server.client("alice").get(f"/v1/requests/{rid}").json()["calls"][0]
    assert call["resolution"] == "edited" and call["action"]["args"] == {"amount": 500, "to": "X"}


def test_an_edit_keeps_untouched_fields_whose_shown_form_differs(server: Server) -> None:
    memo = "line one\nline two \u202e\x1b[0m"
    r = server.submit(
        [
            {
                "id": "call_1",
                "name": "transfer_funds",
                "args": {"amount": 50_000, "to": "A", "memo": memo},
            }
        ]
    )
    rid = r.json()["id"]
    bob = sign_in(server, "bob")
    page = bob.get(f"/requests/{rid}").text
    shown = field_value(page, "memo")
    assert shown == "line one⏎line two <U+202E>␛[0m"
    data = {
        "tool_call_id": "call_1",
        "type": "edit",
        "arg.amount": "20000",
        "arg.memo": shown,  # sent back as the browser shows it
        "csrf": csrf_of(bob),
    }
    assert form_post(bob, server, f"/requests/{rid}/decide", data).status_code == 303
    call = server.client("alice").get(f"/v1/requests/{rid}").json()["calls"][0]
    assert call["action"]["args"] == {"amount": 20000, "to": "A", "memo": memo}


# ---------------------------------------------------------------- random text
templates = make_templates()
BOB = Identity(kind="approver", name="bob", roles=frozenset({"finance"}))


def hostile_request(text: str) -> ApprovalRequest:
    req = make_request(thread=f"t{text}", calls=[("c1", f"pay{text}", {"note": text})])
    req.agent = f"bot{text}"
    req.user_request = text
    req.reasoning = text
    req.action_requests[0].description = text
    req.action_requests[0].reason = text
    return req


def render(name: str, **context: Any) -> str:
    return templates.env.get_template(name).render(csrf="x", **context)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_text)
def test_random_text_on_the_request_page_is_inert_and_whole(text: str) -> None:
    req = hostile_request(text)
    page = render("_request_body.html", p=present(req, BOB, None))
    assert hidden_chars(page, newlines_allowed=True) == []
    shown = inert(json.dumps(text, ensure_ascii=False))
    assert f"&#34;note&#34;: {escape(shown)}" in page
    assert f'value="{escape(inert(text))}"' in page  # the edit field


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_text)
def test_random_text_after_an_edit_shows_both_sides_inert(text: str) -> None:
    req = hostile_request(text)
    req.calls[0].action = Action(name=req.calls[0].action.name, args={"note": f"{text}!"})
    page = render("_request_body.html", p=present(req, BOB, None))
    assert hidden_chars(page, newlines_allowed=True) == []
    before, after = (escape(inert(json.dumps(v, ensure_ascii=False))) for v in (text, f"{text}!"))
    assert f"<td><del>{before}</del></td><td><ins>{after}</ins></td>" in page


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_text)
def test_random_text_in_the_inbox_list_is_inert_and_whole(text: str) -> None:
    page = render("_inbox_rows.html", rows=[_row(hostile_request(text), BOB)])
    assert hidden_chars(page, newlines_allowed=True) == []
    assert f"thread {escape(inert('t' + text, keep_newlines=True))}" in page


@given(hostile_text)
def test_an_edit_field_sent_back_unchanged_keeps_the_value(text: str) -> None:
    req = make_request(calls=[("c1", "pay", {"note": text, "n": 1})])
    form = {"arg.note": field_text("text", text), "arg.n": "1"}
    assert parse_edit(req.action_requests[0].args, req.review_configs[0], form, None) == {
        "note": text,
        "n": 1,
    }
