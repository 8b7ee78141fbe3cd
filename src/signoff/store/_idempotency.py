"""Idempotent create: a call is identified by ``(thread, tool_call_id)``.

An agent (or a client retrying after a lost reply, or a process restarted after a crash)
may submit the same step twice. The second submission must find the first request and write
nothing; a *different* call reusing an id must be refused loudly, never silently merged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, NamedTuple

from signoff.model import ApprovalRequest, IdempotencyConflict
from signoff.store.audit import canonical_json


class StoredCall(NamedTuple):
    request_id: str
    fingerprint: str


def call_fingerprint(name: str, args: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of ``{name, args}``."""
    body = canonical_json({"name": name, "args": args})
    return hashlib.sha256(body.encode("ascii")).hexdigest()


def fingerprints(request: ApprovalRequest) -> dict[str, str]:
    """Fingerprint per tool-call id; refuses a request that repeats a call id."""
    out: dict[str, str] = {}
    for action in request.action_requests:
        if action.tool_call_id in out:
            raise IdempotencyConflict(
                f"request {request.id} holds call {action.tool_call_id} twice on thread "
                f"{request.thread}; every call of a step needs its own tool-call id"
            )
        out[action.tool_call_id] = call_fingerprint(action.name, action.args)
    return out


def existing_request_id(
    request: ApprovalRequest, prints: Mapping[str, str], stored: Mapping[str, StoredCall]
) -> str | None:
    """The stored request ``request`` repeats, or None when it is new.

    ``stored`` maps the call ids of ``request`` already on its thread to where they are.
    Raises :class:`IdempotencyConflict` when an id is reused for a different call, or when
    the calls are only partly stored or spread over several requests.
    """
    if not stored:
        return None
    thread = request.thread
    for call_id, fingerprint in prints.items():
        found = stored.get(call_id)
        if found is not None and found.fingerprint != fingerprint:
            raise IdempotencyConflict(
                f"tool call {call_id} on thread {thread} was already submitted with a different "
                f"tool name or arguments (request {found.request_id}); give a different call "
                "a new tool-call id"
            )
    missing = [call_id for call_id in prints if call_id not in stored]
    if missing:
        known = next(iter(stored))
        raise IdempotencyConflict(
            f"call {missing[0]} on thread {thread} is new, but call {known} of the same step "
            f"is already stored in request {stored[known].request_id}; resubmit the step with "
            "exactly the same calls, or use new tool-call ids for all of them"
        )
    owners = sorted({found.request_id for found in stored.values()})
    if len(owners) > 1:
        raise IdempotencyConflict(
            f"the calls {', '.join(sorted(stored))} on thread {thread} belong to different "
            f"requests ({', '.join(owners)}); resubmit each step as it was first submitted"
        )
    return owners[0]
