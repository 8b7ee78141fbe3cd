"""``/openapi.json``, generated from the pydantic models in :mod:`.wire` (OpenAPI 3.1).

Written out by hand per operation rather than inferred, so every status code a handler can
answer is listed — schemathesis checks the server against exactly this document.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import BaseModel, Field
from pydantic.json_schema import models_json_schema

from signoff import __version__
from signoff.model import Decision
from signoff.server import wire

REF = "#/components/schemas/{model}"


class DecisionsBody(BaseModel):
    """``POST /v1/requests/{id}/decisions``; a bare list of decisions is accepted too."""

    decisions: list[Decision] = Field(min_length=1)


_BODIES: list[type[BaseModel]] = [
    wire.SubmitBody,
    wire.InquiryBody,
    wire.CancelBody,
    wire.ExecutionBody,
    wire.GrantBody,
    wire.RevokeGrantBody,
    DecisionsBody,
    Decision,
]
_RESPONSES: list[type[BaseModel]] = [
    wire.SubmitOut,
    wire.RequestOut,
    wire.RequestList,
    wire.DecisionOut,
    wire.GrantOut,
    wire.GrantList,
    wire.MeOut,
    wire.EventOut,
    wire.AuditPage,
    wire.Health,
    wire.ErrorOut,
]


@functools.lru_cache(maxsize=1)
def _components() -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
    keys, schema = models_json_schema(
        [(m, "validation") for m in _BODIES] + [(m, "serialization") for m in _RESPONSES],
        ref_template=REF,
    )
    body_refs = {m.__name__: keys[(m, "validation")]["$ref"] for m in _BODIES}
    response_refs = {m.__name__: keys[(m, "serialization")]["$ref"] for m in _RESPONSES}
    return body_refs, response_refs, schema.get("$defs", {})


def _json(ref: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": ref}}}


def _responses(
    ok: int, ok_model: str | None, *errors: int, text: str | None = None
) -> dict[str, Any]:
    _, refs, _ = _components()
    out: dict[str, Any] = {}
    if ok_model is not None:
        out[str(ok)] = {"description": "OK", "content": _json(refs[ok_model])}
    elif text is not None:
        out[str(ok)] = {"description": "OK", "content": {text: {"schema": {"type": "string"}}}}
    descriptions = {
        401: "No or unknown credentials",
        403: "Not allowed (role, self-approval, other agent's request, CSRF, origin)",
        404: "No such request (or grant)",
        409: "Already decided (says by whom, when, what), already executed, or id conflict",
        422: "Invalid body or parameter; `field` names it",
        503: "The store is unavailable (fail closed)",
    }
    for code in errors:
        out[str(code)] = {"description": descriptions[code], "content": _json(refs["ErrorOut"])}
    return out


def _body(model: str, required: bool = True) -> dict[str, Any]:
    refs, _, _ = _components()
    return {"required": required, "content": _json(refs[model])}


def _path_id(*names: str) -> list[dict[str, Any]]:
    return [
        {"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in names
    ]


def _query(name: str, schema: dict[str, Any], description: str = "") -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


_TEXT = {"type": "string", "maxLength": 200}
_AUTH: list[dict[str, list[str]]] = [{"bearer": []}]


def _operations(long_poll_max: float) -> dict[str, Any]:
    refs, refs_out, _ = _components()
    decisions_body = {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "oneOf": [
                        {"$ref": refs["DecisionsBody"]},
                        {"type": "array", "minItems": 1, "items": {"$ref": refs["Decision"]}},
                    ]
                }
            }
        },
    }
    return {
        "/v1/requests": {
            "post": {
                "operationId": "submit",
                "summary": "Submit one agent step's tool calls (idempotent on tool-call ids)",
                "security": _AUTH,
                "requestBody": _body("SubmitBody"),
                "responses": {
                    **_responses(201, "SubmitOut", 401, 403, 409, 422, 503),
                    "200": {
                        "description": "Nothing stored: every call allowed or denied, or a "
                        "retry of a step already stored (the same request)",
                        "content": _json(_components()[1]["SubmitOut"]),
                    },
                },
            },
            "get": {
                "operationId": "listRequests",
                "summary": "Requests the caller may see, newest first",
                "security": _AUTH,
                "parameters": [
                    _query(
                        "status",
                        {"type": "string", "enum": ["pending", "resolved", "expired", "cancelled"]},
                    ),
                    _query("kind", {"type": "string", "enum": ["tool_call", "inquiry"]}),
                    _query("thread", _TEXT),
                    _query("limit", {"type": "integer", "minimum": 1, "maximum": 500}),
                    _query("offset", {"type": "integer", "minimum": 0, "maximum": 10_000_000}),
                ],
                "responses": _responses(200, "RequestList", 401, 422, 503),
            },
        },
        "/v1/inquiries": {
            "post": {
                "operationId": "ask",
                "summary": "Ask a human a question (a request of kind inquiry)",
                "security": _AUTH,
                "requestBody": _body("InquiryBody"),
                "responses": _responses(201, "RequestOut", 401, 403, 422, 503),
            }
        },
        "/v1/requests/{id}": {
            "get": {
                "operationId": "getRequest",
                "security": _AUTH,
                "parameters": _path_id("id"),
                "responses": _responses(200, "RequestOut", 401, 403, 404, 503),
            }
        },
        "/v1/requests/{id}/decisions": {
            "post": {
                "operationId": "decide",
                "summary": "Approve, edit, reject or respond, as the authenticated approver",
                "security": _AUTH,
                "parameters": _path_id("id"),
                "requestBody": decisions_body,
                "responses": _responses(200, "DecisionOut", 401, 403, 404, 409, 422, 503),
            }
        },
        "/v1/requests/{id}/wait": {
            "get": {
                "operationId": "wait",
                "summary": "Long-poll until the request is terminal or the timeout passes",
                "security": _AUTH,
                "parameters": [
                    *_path_id("id"),
                    _query("timeout", {"type": "number", "minimum": 0, "maximum": long_poll_max}),
                ],
                "responses": _responses(200, "RequestOut", 401, 403, 404, 422, 503),
            }
        },
        "/v1/requests/{id}/cancel": {
            "post": {
                "operationId": "cancel",
                "security": _AUTH,
                "parameters": _path_id("id"),
                "requestBody": _body("CancelBody", required=False),
                "responses": _responses(200, "RequestOut", 401, 403, 404, 409, 422, 503),
            }
        },
        "/v1/requests/{id}/calls/{call_id}/execution": {
            "post": {
                "operationId": "recordExecution",
                "summary": "Exactly-once ledger of an approved call run by a remote agent",
                "security": _AUTH,
                "parameters": _path_id("id", "call_id"),
                "requestBody": _body("ExecutionBody"),
                "responses": _responses(200, "RequestOut", 401, 403, 404, 409, 422, 503),
            }
        },
        "/v1/grants": {
            "get": {
                "operationId": "listGrants",
                "summary": "Grants (standing approvals and refusals), newest first; approvers",
                "security": _AUTH,
                "parameters": [
                    _query("active", {"type": "boolean"}, "only grants neither revoked nor expired")
                ],
                "responses": _responses(200, "GrantList", 401, 403, 422, 503),
            },
            "post": {
                "operationId": "createGrant",
                "summary": "Create a grant as the authenticated approver",
                "security": _AUTH,
                "requestBody": _body("GrantBody"),
                "responses": _responses(201, "GrantOut", 401, 403, 422, 503),
            },
        },
        "/v1/me": {
            "get": {
                "operationId": "me",
                "summary": "Who the credentials belong to: kind, name, roles",
                "security": _AUTH,
                "responses": _responses(200, "MeOut", 401, 503),
            }
        },
        "/v1/grants/{id}": {
            "delete": {
                "operationId": "revokeGrant",
                "summary": "Revoke a grant: its creator, or one of grants.admin_roles",
                "security": _AUTH,
                "parameters": _path_id("id"),
                "requestBody": _body("RevokeGrantBody", required=False),
                "responses": _responses(200, "GrantOut", 401, 403, 404, 422, 503),
            }
        },
        "/v1/events": {
            "get": {
                "operationId": "events",
                "summary": "Server-Sent Events; each event's data is an EventOut",
                "security": _AUTH,
                "responses": _responses(200, None, 401, text="text/event-stream"),
            }
        },
        "/v1/audit": {
            "get": {
                "operationId": "audit",
                "security": _AUTH,
                "parameters": [
                    _query("format", {"type": "string", "enum": ["json", "jsonl"]}),
                    _query("after_seq", {"type": "integer", "minimum": 0}),
                    _query("limit", {"type": "integer", "minimum": 1, "maximum": 1000}),
                    *(_query(n, _TEXT) for n in ("request_id", "thread", "tool", "event", "actor")),
                    _query("since", {"type": "string", "format": "date-time"}),
                    _query("until", {"type": "string", "format": "date-time"}),
                ],
                "responses": _audit_responses(refs_out),
            }
        },
        "/healthz": {
            "get": {
                "operationId": "health",
                "responses": {
                    "200": {"description": "OK", "content": _json(refs_out["Health"])},
                    "503": {"description": "Unavailable", "content": _json(refs_out["Health"])},
                },
            }
        },
        "/metrics": {
            "get": {
                "operationId": "metrics",
                "description": "Prometheus text. With `serve.metrics_token` set, it needs "
                "`Authorization: Bearer <that token>`; otherwise no credentials.",
                "security": [{}, {"bearer": []}],
                "responses": _responses(200, None, 401, 503, text="text/plain"),
            }
        },
    }


def _audit_responses(refs_out: dict[str, str]) -> dict[str, Any]:
    out = _responses(200, "AuditPage", 401, 403, 422, 503)
    out["200"]["content"]["application/x-ndjson"] = {"schema": {"type": "string"}}
    return out


def openapi_document(server_url: str, long_poll_max: float = 60.0) -> dict[str, Any]:
    _, _, schemas = _components()
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "signoff",
            "version": __version__,
            "description": "Human sign-off for AI-agent tool calls: submit, wait, decide.",
        },
        "servers": [{"url": server_url}],
        "paths": _operations(long_poll_max),
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
