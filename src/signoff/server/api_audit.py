"""``GET /v1/audit``: the hash-chained audit log, filtered, as JSON pages or a JSONL export.

Admins read every row. Other approvers read the rows of requests they may see (rows about
allowed/denied calls, which belong to no request, are admins' only). Agents read none.
Nobody reads a secret: arguments in the rows are masked (``redact_keys``); rows written by
this version hold digests there already, so their hashes still verify from an export.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from signoff.model import AuditRecord, NotFound
from signoff.policy.redact import NameMatcher, mask_audit_data
from signoff.server.access import may_see, require_approver
from signoff.server.bodies import query_choice, query_int, query_text, query_time
from signoff.server.identity import Identity
from signoff.server.state import ServerState, state_of
from signoff.store import AuditQuery

PAGE = 1000


def audit_query(request: Request, *, limit: int) -> AuditQuery:
    return AuditQuery(
        after_seq=query_int(request, "after_seq", 0, 0, 2**62),
        limit=limit,
        request_id=query_text(request, "request_id"),
        thread=query_text(request, "thread"),
        tool=query_text(request, "tool"),
        event=query_text(request, "event"),
        actor=query_text(request, "actor"),
        since=query_time(request, "since"),
        until=query_time(request, "until"),
    )


class Visibility:
    """Memoised ``may_see`` per request id for one audit read."""

    def __init__(self, state: ServerState, who: Identity) -> None:
        self.state, self.who = state, who
        self._seen: dict[str, bool] = {}

    async def allows(self, record: AuditRecord) -> bool:
        if self.who.admin:
            return True
        rid = record.request_id
        if rid is None:
            return False
        if rid not in self._seen:
            try:
                req = await self.state.gate.get(rid)
            except NotFound:
                self._seen[rid] = False
            else:
                self._seen[rid] = may_see(self.who, req)
        return self._seen[rid]


async def read_audit(request: Request) -> Response:
    state = state_of(request)
    who = await state.auth.require(request)
    require_approver(who, "read the audit log")
    fmt = query_choice(request, "format", ("json", "jsonl")) or "json"
    limit = query_int(request, "limit", 100, 1, PAGE)
    query = audit_query(request, limit=limit)
    await state.gate.store.flush_audit()
    visibility = Visibility(state, who)
    if fmt == "jsonl":
        return StreamingResponse(
            _jsonl(state, query, visibility),
            media_type="application/x-ndjson",
            headers={"Content-Disposition": 'attachment; filename="signoff-audit.jsonl"'},
        )
    rows = await state.gate.store.read_audit(query)
    secrets = state.policy.secret_keys
    visible = [shown(r, secrets) for r in rows if await visibility.allows(r)]
    next_after = rows[-1].seq if len(rows) == limit else None
    return JSONResponse({"records": visible, "next_after_seq": next_after})


async def _jsonl(
    state: ServerState, query: AuditQuery, visibility: Visibility
) -> AsyncIterator[str]:
    after = query.after_seq
    secrets = state.policy.secret_keys
    while True:
        rows = await state.gate.store.read_audit(replace(query, after_seq=after, limit=PAGE))
        for row in rows:
            if await visibility.allows(row):
                yield json.dumps(shown(row, secrets), ensure_ascii=False) + "\n"
        if len(rows) < PAGE:
            return
        after = rows[-1].seq


def shown(record: AuditRecord, secrets: NameMatcher) -> dict[str, Any]:
    """A row as the API serves it: arguments masked."""
    doc = record.to_wire()
    doc["data"] = mask_audit_data(record.data, secrets)
    return doc


routes = [Route("/v1/audit", read_audit, methods=["GET"])]
