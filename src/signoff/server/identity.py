"""Who is calling: an agent or an approver, proven by a bearer token, a browser session, or
a trusted SSO proxy's header.

Decisions record this identity, never a name from the request body. An approver's roles
always come from the config's ``people:`` directory, read at request time, so changing the
directory changes what a token may do without re-issuing it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from starlette.requests import HTTPConnection

from signoff.model.identity import PersonKey, person_key
from signoff.policy import Policy
from signoff.server.errors import forbidden, unauthorized
from signoff.server.records import ServerDB, TokenKind, digest
from signoff.server.settings import AuthSettings
from signoff.server.token_cache import TokenCache

SESSION_COOKIE = "signoff_session"
Via = Literal["token", "session", "proxy"]


@dataclass(frozen=True, slots=True)
class Identity:
    """The authenticated caller. ``session_key`` is what browser CSRF tokens are bound to;
    ``key`` compares people the policy's way (case, width and ``aliases:``)."""

    kind: TokenKind
    name: str
    roles: frozenset[str] = frozenset()
    admin: bool = False
    via: Via = "token"
    trusted_roles: bool = False
    session_key: str | None = None
    key: PersonKey = field(default=person_key, compare=False, repr=False)

    @property
    def agent(self) -> bool:
        return self.kind == "agent"

    @property
    def approver(self) -> bool:
        return self.kind == "approver"

    @property
    def browser(self) -> bool:
        """Credentials a browser sends by itself (cookie, proxy header) need CSRF checks."""
        return self.via != "token"


class Authenticator:
    """Turns a request's credentials into an :class:`Identity` (or a 401)."""

    def __init__(self, db: ServerDB, policy: Policy, settings: AuthSettings) -> None:
        self.db = db
        self.policy = policy
        self.settings = settings
        self.tokens = TokenCache(db)

    def person(self, name: str, *, via: Via = "token", session_key: str | None = None) -> Identity:
        roles = self.policy.roles_of(name)
        admin = not roles.isdisjoint(self.settings.admin_roles)
        return Identity(
            "approver",
            name,
            roles,
            admin,
            via,
            session_key=session_key,
            key=self.policy.person_key,
        )

    async def identify(self, conn: HTTPConnection) -> Identity | None:
        """The caller, or None when no credentials were sent; a bad token is a 401 at once
        (never a silent fall-back to a cookie)."""
        header = conn.headers.get("authorization")
        if header is not None:
            return await self._bearer(header)
        proxied = self._proxy(conn)
        if proxied is not None:
            return proxied
        cookie = conn.cookies.get(SESSION_COOKIE)
        if cookie:
            return await self._session(cookie)
        return None

    async def require(self, conn: HTTPConnection) -> Identity:
        who = await self.identify(conn)
        if who is None:
            raise unauthorized(
                "sign in: send `Authorization: Bearer <token>` (create one with "
                "`signoff token create`) or use the web inbox's sign-in page"
            )
        return who

    async def _bearer(self, header: str) -> Identity:
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise unauthorized("the Authorization header must be `Bearer <token>`")
        record = await self.tokens.get(digest(token))
        if record is None or not record.active:
            raise unauthorized("this token is unknown or was revoked; ask for a new one")
        if record.kind == "agent":
            return Identity("agent", record.subject, trusted_roles=record.trusted_roles)
        return self.person(record.subject)

    async def token_identity(self, token: str) -> tuple[Identity, str]:
        """For the sign-in form: the approver a token belongs to, and the token's id."""
        record = await self.db.token_by_hash(digest(token.strip()))
        if record is None or not record.active:
            raise unauthorized("this token is unknown or was revoked")
        if record.kind != "approver":
            raise forbidden("agent tokens cannot sign in to the inbox; use an approver token")
        return self.person(record.subject), record.id

    def _proxy(self, conn: HTTPConnection) -> Identity | None:
        proxy = self.settings.trusted_proxy
        if proxy is None:
            return None
        peer = conn.client.host if conn.client else None
        if not proxy.trusts(peer):
            return None  # headers from anyone else are ignored, never trusted
        user = (conn.headers.get(proxy.user_header) or "").strip()
        email = (conn.headers.get(proxy.email_header) or "").strip()
        name = user or self._by_email(email)
        if not name:
            if email:
                raise forbidden(f"{email} is not in the people: directory of this server")
            return None
        if self.policy.people and name not in self.policy.people:
            raise forbidden(f"{name} is not in the people: directory of this server")
        return self.person(name, via="proxy", session_key=f"proxy:{name}")

    def _by_email(self, email: str) -> str | None:
        if not email:
            return None
        wanted = email.lower()
        for person in self.policy.people.values():
            if person.email and person.email.lower() == wanted:
                return person.id
        return None if self.policy.people else email

    async def _session(self, cookie: str) -> Identity:
        id_hash = digest(cookie)
        session = await self.db.session_by_hash(id_hash, time.time())
        if session is None:
            raise unauthorized("your session has expired or was ended; sign in again")
        return self.person(session.subject, via="session", session_key=id_hash)
