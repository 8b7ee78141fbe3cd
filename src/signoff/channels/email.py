"""Email: SMTP submission with STARTTLS and login; one personal link per recipient.

**Provider side**: an SMTP relay account (your mail provider, SES, Postmark, a company
relay). Config: ``channels.email: {host, port, username, password, from, starttls}``
(587 with STARTTLS by default; ``ssl: true`` for 465; ``ca_file`` for a private relay's
certificate). A password is never sent without TLS.

**Out**: one message per approver (``people.<id>.email``): plain text and HTML parts, the
calls with arguments redacted, and — inside ``signoff serve`` — a personal one-click link
(an email reaches one person, so an approver-bound link may travel in it; the link page
never decides on GET, so mail scanners that open links decide nothing). The subject holds
no arguments (lock screens and gateways show it). The ``Message-ID`` is the outbox row id,
the same on every retry, so a resend after a lost answer is recognisable. Email cannot be
edited afterwards; the link page says who decided.

Retries: connection errors, timeouts and 4xx SMTP replies; 5xx replies and refused
logins are final.
"""

from __future__ import annotations

import asyncio
import email.policy
import html
import smtplib
import ssl
from collections.abc import Sequence
from email.message import EmailMessage
from email.utils import formatdate, parseaddr
from typing import TYPE_CHECKING, Any

from signoff.channels import DeliveryError, Outgoing, Target, message
from signoff.channels.config import EmailConfig, missing_secrets
from signoff.model.text import inert

if TYPE_CHECKING:
    import httpx

    from signoff.policy.people import Person
    from signoff.store.base import OutboxKind


# Header lines up to RFC 5322's hard limit (998) rather than its recommended 78: Python folds
# a subject of 70-77 characters by moving it whole onto a continuation line, which readers
# then show with a leading space (a subject over 998 characters still folds between words)
_POLICY = email.policy.default.clone(max_line_length=998)


def build_message(out: Outgoing, sender: str) -> EmailMessage:
    """The email for one recipient. The subject is one line of inert text (a CR/LF from an
    agent becomes ``⏎``: no header injection, and no refused message either)."""
    req = out.request
    domain = parseaddr(sender)[1].rpartition("@")[2] or "signoff.invalid"
    msg = EmailMessage(policy=_POLICY)
    msg["Subject"] = f"[signoff] {message.title(req, out.kind)} ({req.id})"
    msg["From"] = sender
    msg["To"] = out.target.address
    msg["Date"] = formatdate(localtime=False, usegmt=True)
    msg["Message-ID"] = f"<{out.key}@{domain}>"
    msg["Auto-Submitted"] = "auto-generated"
    msg["X-Signoff-Request"] = req.id
    msg.set_content(_text(out))
    msg.add_alternative(_html(out), subtype="html")
    return msg


def _lines(out: Outgoing) -> list[str]:
    req = out.request
    question = message.question(req)
    return [question] if question else message.call_lines(req, out.redact, limit=500)


def _text(out: Outgoing) -> str:
    req = out.request
    parts = [message.title(req, out.kind), ""]
    parts += [f"  {line}" for line in _lines(out)]
    if req.inquiry and req.inquiry.choices:
        parts += ["", "Choices: " + inert(", ".join(req.inquiry.choices))]
    parts += ["", message.context_line(req)]
    if req.user_request:  # one line: a line break could fake a "Review and decide:" link
        parts.append(f"The user asked: {inert(req.user_request)}")
    parts.append("")
    if out.review_link:
        parts += [f"Review and decide: {out.review_link}", "(The page asks you to confirm.)"]
    if out.page_url:
        parts.append(f"Open in the inbox: {out.page_url}")
    if not out.review_link and not out.page_url:
        parts.append(message.cli_hint(req))
    parts += ["", f"Request {req.id}. Sent by signoff; do not reply."]
    return "\n".join(parts) + "\n"


def _html(out: Outgoing) -> str:
    req = out.request
    esc = html.escape
    items = "".join(f"<li><code>{esc(line)}</code></li>" for line in _lines(out))
    body = [f"<h2>{esc(message.title(req, out.kind))}</h2>", f"<ul>{items}</ul>"]
    if req.inquiry and req.inquiry.choices:
        body.append("<p>Choices: " + esc(inert(", ".join(req.inquiry.choices))) + "</p>")
    body.append(f"<p>{esc(message.context_line(req))}</p>")
    if out.review_link:
        body.append(
            f'<p><a href="{esc(out.review_link)}">Review and decide</a> '
            "(the page asks you to confirm)</p>"
        )
    if out.page_url:
        body.append(f'<p><a href="{esc(out.page_url)}">Open in the inbox</a></p>')
    if not out.review_link and not out.page_url:
        body.append(f"<p><code>{esc(message.cli_hint(req))}</code></p>")
    body.append(f"<p><small>Request {esc(req.id)}. Sent by signoff.</small></p>")
    return "<!doctype html><html><body>" + "".join(body) + "</body></html>"


class EmailChannel:
    """SMTP (STARTTLS + login) with a personal link per recipient."""

    name = "email"
    kinds = frozenset({"prompt", "reminder", "escalation"})
    personal_links = True

    def __init__(self, config: EmailConfig) -> None:
        self.config = config

    def ready(self) -> str | None:
        return missing_secrets(self.config, "channels.email")

    def targets(
        self, people: Sequence[Person], kind: OutboxKind, event: str | None = None
    ) -> list[Target]:
        if kind == "event":
            return []
        return [Target(p.email, p.id) for p in people if p.email]

    async def send(self, out: Outgoing, http: httpx.AsyncClient) -> dict[str, Any] | None:
        msg = build_message(out, self.config.sender)
        password = self.config.password.value() if self.config.password is not None else None
        await asyncio.to_thread(self._submit, msg, password)
        return None

    async def update(self, out: Outgoing, ref: dict[str, Any], http: httpx.AsyncClient) -> None:
        return None  # an email cannot be edited; its link page shows the outcome

    def _context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.config.ca_file)

    def _submit(self, msg: EmailMessage, password: str | None) -> None:
        cfg = self.config
        try:
            smtp: smtplib.SMTP
            if cfg.ssl:
                smtp = smtplib.SMTP_SSL(
                    cfg.host, cfg.port, timeout=cfg.timeout, context=self._context()
                )
            else:
                smtp = smtplib.SMTP(cfg.host, cfg.port, timeout=cfg.timeout)
            with smtp:
                smtp.ehlo()
                if cfg.starttls:
                    smtp.starttls(context=self._context())
                    smtp.ehlo()
                if cfg.username is not None and password is not None:
                    smtp.login(cfg.username, password)
                smtp.send_message(msg)
        except smtplib.SMTPAuthenticationError as exc:
            raise DeliveryError(f"smtp login refused: {exc.smtp_code}", retryable=False) from None
        except smtplib.SMTPNotSupportedError as exc:
            raise DeliveryError(f"smtp: {exc}", retryable=False) from None
        except smtplib.SMTPRecipientsRefused as exc:
            codes = [code for code, _ in exc.recipients.values()]
            raise DeliveryError(
                f"smtp refused the recipient: {codes}", retryable=all(400 <= c < 500 for c in codes)
            ) from None
        except smtplib.SMTPResponseException as exc:
            raise DeliveryError(
                f"smtp {exc.smtp_code}: {exc.smtp_error!r}", retryable=400 <= exc.smtp_code < 500
            ) from None
        except ssl.SSLCertVerificationError as exc:
            raise DeliveryError(f"smtp TLS certificate: {exc.reason}", retryable=False) from None
        except (smtplib.SMTPException, OSError) as exc:  # disconnects, timeouts, refused
            raise DeliveryError(f"smtp: {type(exc).__name__}: {exc}", retryable=True) from None
