"""Who may call ``answer_inquiry``: never the session that asked (``--answer-tool``).

The model sees every tool its client lists, so a model offered ``answer_inquiry`` can answer
its own question. The tool is for a human's *other* client — a phone connected to the same
server over HTTP. :func:`answer_refusal` is the whole rule, as a function of the mode, the
asking session and the answering session:

* ``off``: nobody answers through the tool (the inbox, channels and ``signoff respond`` do).
* ``other-sessions`` (default): only a session other than the asking one. On stdio there is
  one session, so the tool is never offered; over HTTP a session is the client's
  ``Mcp-Session-Id`` (2025-11-25). A sessionless request (2026-07-28 over HTTP) cannot be told
  apart from the asker, so it is not offered the tool and may not answer (fail closed).
* ``all``: any session, the asker's included (a trusted single-user setup).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from mcp.server import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from signoff.model import new_id

AnswerTool = Literal["off", "other-sessions", "all"]
ANSWER_TOOL_MODES: tuple[str, ...] = get_args(AnswerTool)
SESSION_HEADER = "mcp-session-id"
_STATE_KEY = "signoff.inquiry_session"

_ELSEWHERE = "answer it in the web inbox, a chat channel or with `signoff respond`"


def offers_answer_tool(mode: AnswerTool, *, many_sessions: bool, session: str | None) -> bool:
    """Whether ``answer_inquiry`` is listed to ``session``."""
    if mode == "all":
        return True
    return mode == "other-sessions" and many_sessions and session is not None


def answer_refusal(
    mode: AnswerTool, *, many_sessions: bool, asking: str | None, answering: str | None
) -> str | None:
    """None if the ``answering`` session may answer an inquiry ``asking`` asked (None: asked
    elsewhere or sessionless), else why not."""
    if mode == "all":
        return None
    if mode == "off":
        return f"answer_inquiry is turned off on this server (--answer-tool off); {_ELSEWHERE}."
    if not many_sessions:
        return (
            "this server has one session (stdio), the one that asked: an inquiry is not "
            f"answered by the client that asked it; {_ELSEWHERE}."
        )
    if answering is None:
        return (
            "this request has no MCP session (2026-07-28 over HTTP), so it cannot be told "
            f"apart from the client that asked; {_ELSEWHERE}, or from a 2025-11-25 session."
        )
    if asking is not None and asking == answering:
        return f"the session that asked this inquiry may not answer it; {_ELSEWHERE}."
    return None


class Sessions:
    """Names the session of a request and remembers which session asked which inquiry.

    A session is a 2025-11-25 connection: over HTTP its ``Mcp-Session-Id``, over stdio or in
    memory the connection itself. A 2026-07-28 request stands alone (no session), so it has
    no name. In memory only: a session does not outlive the process, and an inquiry asked by
    another process (another server on the same store) was asked by a session other than any
    here. Session ids are capabilities, so they are kept here, never stored or logged."""

    def __init__(self) -> None:
        self._askers: dict[str, str | None] = {}

    def of(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        """The session of ``ctx``'s request; None for a sessionless request."""
        headers = getattr(ctx.request, "headers", None)
        found = headers.get(SESSION_HEADER) if headers is not None else None
        if found:
            return f"http:{found}"
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return None
        # The SDK hands handlers a fresh ServerSession per request, over one Connection per
        # client (its ``state`` persists across that client's requests).
        connection = getattr(ctx.session, "_connection", None)
        state = getattr(connection, "state", None)
        if not isinstance(state, dict):
            return None
        name = state.setdefault(_STATE_KEY, new_id("session"))
        return str(name)

    def asked(self, inquiry_id: str, session: str | None) -> None:
        self._askers[inquiry_id] = session

    def asker(self, inquiry_id: str) -> str | None:
        return self._askers.get(inquiry_id)

    def forget(self, inquiry_id: str) -> None:
        self._askers.pop(inquiry_id, None)
