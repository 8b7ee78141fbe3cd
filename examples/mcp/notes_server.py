"""An example MCP server to put behind ``signoff mcp-proxy``: notes in a folder, plus an
e-mail tool that only pretends to send.

    signoff mcp-proxy -c examples/mcp/signoff.yaml -- python examples/mcp/notes_server.py

Notes live in ``$NOTES_DIR`` (default ``./notes``). Reading is harmless; writing, deleting and
sending mail are what the example policy puts in front of a human.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server import MCPServer

server = MCPServer("notes", instructions="Keep and share short text notes.")


def _folder() -> Path:
    folder = Path(os.environ.get("NOTES_DIR", "notes")).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _note(name: str) -> Path:
    path = (_folder() / f"{name}.md").resolve()
    if path.parent != _folder():
        raise ValueError(f"{name!r} is not a plain note name")
    return path


@server.tool()
def list_notes() -> list[str]:
    """The names of all notes."""
    return sorted(p.stem for p in _folder().glob("*.md"))


@server.tool()
def read_note(name: str) -> str:
    """The text of one note."""
    return _note(name).read_text(encoding="utf-8")


@server.tool()
def write_note(name: str, text: str) -> str:
    """Create or replace a note."""
    _note(name).write_text(text, encoding="utf-8")
    return f"saved {name}"


@server.tool()
def delete_note(name: str) -> str:
    """Delete a note for good."""
    _note(name).unlink()
    return f"deleted {name}"


@server.tool()
def send_email(to: str, subject: str, body: str) -> str:
    """Send a note by e-mail (this example only pretends)."""
    return f"(pretend) sent {subject!r} to {to}"


if __name__ == "__main__":
    server.run()  # stdio
