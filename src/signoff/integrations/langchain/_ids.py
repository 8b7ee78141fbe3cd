"""Tool-call ids scoped per model turn.

Providers need not keep tool-call ids unique across turns (LangChain's own test model
reuses ``call_1``), while signoff's store treats ``(thread, call id)`` as one call for good:
the same id again would be "already executed", or an idempotency conflict. So this
integration stores ``<AI message id>:<tool-call id>``, and shows and accepts LangChain's
plain tool-call id wherever a LangChain client sees one (the interrupt value, decisions
keyed by id, the texts the model reads).
"""

from __future__ import annotations

from langchain_core.messages import AIMessage


def scoped(ai: AIMessage | None, call_id: str) -> str:
    """The id signoff stores for tool call ``call_id`` of model message ``ai``."""
    if ai is None or not ai.id:
        return call_id
    return f"{ai.id}:{call_id}"


def prefix_of(ai: AIMessage | None) -> str:
    return f"{ai.id}:" if ai is not None and ai.id else ""


def local(prefix: str, stored_id: str) -> str:
    """LangChain's tool-call id for a stored id (unchanged if it carries no such prefix)."""
    return stored_id[len(prefix) :] if prefix and stored_id.startswith(prefix) else stored_id


def stored(prefix: str, given_id: str, known: set[str]) -> str:
    """The stored id a client meant: a known stored id as is, else LangChain's id scoped."""
    if given_id in known or not prefix:
        return given_id
    candidate = prefix + given_id
    return candidate if candidate in known else given_id
