"""Official test vectors pin each verifier to its published scheme: Slack's signing example,
Standard Webhooks' vector, RFC 8032 §7.1 Ed25519 (Discord), and line-bot-sdk's own vector."""

from __future__ import annotations

import pytest

from signoff.channels import discord, line, slack, webhooks

# docs.slack.dev "Verifying requests from Slack"
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
SLACK_TS = "1531420618"
SLACK_BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id="
    b"G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-"
    b"collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F3977008"
    b"85554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c4"
    b"47fce8b6703c"
)
SLACK_SIG = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


def test_slack_signature_matches_slacks_published_example() -> None:
    assert slack.signature(SLACK_SECRET, SLACK_TS, SLACK_BODY) == SLACK_SIG


def test_slack_example_verifies_inside_the_window_and_not_after() -> None:
    headers = {"x-slack-request-timestamp": SLACK_TS, "x-slack-signature": SLACK_SIG}
    now = int(SLACK_TS)
    assert slack.verify(SLACK_SECRET, headers, SLACK_BODY, now + 300)
    assert not slack.verify(SLACK_SECRET, headers, SLACK_BODY, now + 301)
    assert not slack.verify(SLACK_SECRET, headers, SLACK_BODY + b"x", now)
    assert not slack.verify("another-secret", headers, SLACK_BODY, now)


# standard-webhooks/standard-webhooks: libraries/go/webhook_test.go
SW_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SW_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SW_TS = 1614265330
SW_BODY = b'{"test": 2432232314}'
SW_SIG = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_standard_webhooks_signature_matches_the_spec_vector() -> None:
    assert webhooks.sign(SW_SECRET, SW_ID, SW_TS, SW_BODY) == SW_SIG


def test_standard_webhooks_vector_verifies_and_rotation_lists_are_accepted() -> None:
    headers = {"webhook-id": SW_ID, "webhook-timestamp": str(SW_TS), "webhook-signature": SW_SIG}
    assert webhooks.verify([SW_SECRET], headers, SW_BODY, SW_TS + 10)
    rotated = {**headers, "webhook-signature": f"v1,bm90LXRoaXM= {SW_SIG}"}
    assert webhooks.verify([SW_SECRET], rotated, SW_BODY, SW_TS)
    assert not webhooks.verify([SW_SECRET], headers, SW_BODY, SW_TS + 301)
    assert not webhooks.verify([SW_SECRET], {**headers, "webhook-id": "msg_2"}, SW_BODY, SW_TS)
    assert not webhooks.verify(
        [SW_SECRET], {**headers, "webhook-signature": "garbage"}, SW_BODY, SW_TS
    )


# RFC 8032 §7.1 TEST 1 and TEST 2: (public key, message, signature)
RFC8032 = [
    (
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bac"
        "c61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e"
        "458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
]


@pytest.mark.parametrize(("public", "msg", "sig"), RFC8032)
def test_ed25519_verifier_accepts_rfc8032_vectors(public: str, msg: str, sig: str) -> None:
    assert discord.ed25519_valid(public, sig, bytes.fromhex(msg))


@pytest.mark.parametrize(("public", "msg", "sig"), RFC8032)
def test_ed25519_verifier_refuses_a_changed_message(public: str, msg: str, sig: str) -> None:
    assert not discord.ed25519_valid(public, sig, bytes.fromhex(msg) + b"!")
    assert not discord.ed25519_valid(public, "00" * 64, bytes.fromhex(msg))
    assert not discord.ed25519_valid(public, "not hex", bytes.fromhex(msg))


# line-bot-sdk-python tests/test_webhook.py
def test_line_signature_matches_line_bot_sdk_vector() -> None:
    body = b"bodybodybodybody"
    expected = "/gg9a+LvFevTH1sd7XCQycD7tsWclCsInj7MhBHxN7k="
    assert line.signature("channel_secret", body) == expected
    assert line.verify("channel_secret", {"x-line-signature": expected}, body)
    assert not line.verify("channel_secret", {"x-line-signature": expected}, body + b"x")
    assert not line.verify("channel_secret", {"x-line-signature": "%%%"}, body)
    assert not line.verify("channel_secret", {}, body)
