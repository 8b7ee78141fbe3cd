"""A real SMTP submission server on loopback: aiosmtpd with STARTTLS required (a
self-signed certificate for 127.0.0.1 made with ``cryptography``) and AUTH required."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
import time
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

USER, PASSWORD = "relay", "s3cret-relay"


def self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "smtp-cert.pem", directory / "smtp-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Mailbox:
    """aiosmtpd handler keeping each delivered message with its envelope."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._cond = threading.Condition()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self._cond:
            self.messages.append(
                {
                    "from": envelope.mail_from,
                    "to": list(envelope.rcpt_tos),
                    "authenticated": session.authenticated,
                    "tls": session.ssl is not None,
                    "message": BytesParser(policy=policy.default).parsebytes(envelope.content),
                }
            )
            self._cond.notify_all()
        return "250 OK"

    def wait(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.messages) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"expected {count} emails, got {len(self.messages)}")
                self._cond.wait(left)
            return list(self.messages)


def _authenticator(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> Any:
    ok = isinstance(data, LoginPassword) and (data.login, data.password) == (
        USER.encode(),
        PASSWORD.encode(),
    )
    return AuthResult(success=ok, handled=False)


class SMTPServer:
    def __init__(self, directory: Path) -> None:
        self.cert, key = self_signed(directory)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, key)
        self.mailbox = Mailbox()
        self.port = free_port()
        self.controller = Controller(
            self.mailbox,
            hostname="127.0.0.1",
            port=self.port,
            server_hostname="localhost",
            tls_context=context,
            require_starttls=True,
            authenticator=_authenticator,
            auth_required=True,
        )
        self.controller.start()

    def stop(self) -> None:
        self.controller.stop()


def body_text(msg: EmailMessage, kind: str) -> str:
    part = msg.get_body((kind,))
    assert part is not None
    return str(part.get_content())
