"""Email over real SMTP (aiosmtpd, STARTTLS required, AUTH required): one message per
approver, text + HTML, no arguments in the subject, a stable Message-ID, retries and
final failures."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from signoff import Gate, Policy
from signoff.store import AuditQuery, MemoryStore
from tests.channels.conftest import policy_text, submit
from tests.channels.smtp import PASSWORD, USER, SMTPServer, body_text, free_port

pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.filterwarnings("ignore:.*login_data.*:DeprecationWarning"),
]


def email_channels(port: int, ca: Path) -> str:
    return f"""
channels:
  email: {{host: 127.0.0.1, port: {port}, username: {USER}, password: "${{T_SMTP_PASSWORD}}",
          from: "signoff <signoff@example.org>", starttls: true, ca_file: "{ca}", timeout: 5}}
  delivery: {{backoff: 0.05, backoff_cap: 0.2, poll: 0.2}}
"""


@pytest.fixture
def smtp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SMTPServer]:
    monkeypatch.setenv("T_SMTP_PASSWORD", PASSWORD)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        server = SMTPServer(tmp_path)
    yield server
    server.stop()


def email_policy(port: int, ca: Path) -> Policy:
    return Policy.from_yaml(policy_text("", "", channels=email_channels(port, ca)))


async def rows_settled(gate: Gate, request_id: str) -> list[Any]:
    assert gate.delivery is not None
    for _ in range(400):
        rows = await gate.delivery.outbox.outbox_for(request_id)
        if rows and all(r.status in ("sent", "failed", "cancelled") for r in rows):
            return rows
        await asyncio.sleep(0.02)
    raise AssertionError("the outbox did not settle")


async def test_each_approver_gets_a_multipart_email_over_starttls(smtp: SMTPServer) -> None:
    async with Gate(email_policy(smtp.port, smtp.cert), MemoryStore()) as gate:
        req = await submit(gate, args={"amount": 50_000, "to": "ACME", "secret": "xyz"})
        mails = smtp.mailbox.wait(2)
        rows = await rows_settled(gate, req.id)
    assert sorted(m["to"][0] for m in mails) == ["alice@example.com", "bob@example.com"]
    assert all(m["authenticated"] and m["tls"] for m in mails)
    msg = mails[0]["message"]
    assert msg["Subject"] == f"[signoff] Approval needed: transfer_funds ({req.id})"
    assert "50000" not in msg["Subject"] and "ACME" not in msg["Subject"]
    assert msg["Auto-Submitted"] == "auto-generated"
    ids = {r.id for r in rows}
    assert msg["Message-ID"].strip("<>").split("@")[0] in ids
    assert msg["Message-ID"].endswith("@example.org>")
    text, html = body_text(msg, "plain"), body_text(msg, "html")
    for body in (text, html):
        assert "50000" in body and "xyz" not in body
        assert f"signoff approve {req.id}" in body  # no server here: decide from a terminal


async def test_a_wrong_password_is_final_and_audited(
    smtp: SMTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("T_SMTP_PASSWORD", "wrong")
    async with Gate(email_policy(smtp.port, smtp.cert), MemoryStore()) as gate:
        req = await submit(gate)
        rows = await rows_settled(gate, req.id)
        audit = await gate.store.read_audit(
            AuditQuery(request_id=req.id, event="notification_failed")
        )
    assert {(r.status, r.attempts) for r in rows} == {("failed", 1)}
    assert "login refused" in audit[0].data["error"]
    assert smtp.mailbox.messages == []


async def test_an_unreachable_relay_is_retried(smtp: SMTPServer) -> None:
    async with Gate(email_policy(free_port(), smtp.cert), MemoryStore()) as gate:
        req = await submit(gate)
        assert gate.delivery is not None
        for _ in range(400):
            rows = await gate.delivery.outbox.outbox_for(req.id)
            if all(r.attempts >= 2 for r in rows):
                break
            await asyncio.sleep(0.02)
    assert all(r.attempts >= 2 and r.status in ("pending", "sending") for r in rows)
    assert any("Connection" in (r.error or "") for r in rows)


async def test_a_certificate_the_client_does_not_trust_is_refused(
    smtp: SMTPServer, tmp_path: Path
) -> None:
    from tests.channels.smtp import self_signed

    other_ca, _ = self_signed(tmp_path / "..")
    async with Gate(email_policy(smtp.port, other_ca), MemoryStore()) as gate:
        req = await submit(gate)
        rows = await rows_settled(gate, req.id)
    assert {r.status for r in rows} == {"failed"}
    assert all("certificate" in (r.error or "") for r in rows)
    assert smtp.mailbox.messages == []
