"""The proxy's ``get_tool_input_schema`` answers None at once for tools that declare no
``Mcp-Param-*`` headers, and the SDK's header check gives the same verdicts either way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from mcp.shared.inbound import validate_mcp_param_headers

from signoff.integrations.mcp.proxy_server import HeaderSchemas, declares_headers

PLAIN = {"type": "object", "properties": {"text": {"type": "string"}}}
ANNOTATED = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "n": {"type": "integer"},
    },
}
NESTED = {
    "type": "object",
    "properties": {
        "where": {
            "type": "object",
            "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}},
        }
    },
}
#: on an object property: the SDK calls the whole schema invalid and checks nothing
INVALID = {"type": "object", "properties": {"o": {"type": "object", "x-mcp-header": "O"}}}
#: two properties, one header name (case-insensitively): invalid as well
DUPLICATE = {
    "type": "object",
    "properties": {
        "a": {"type": "string", "x-mcp-header": "Tenant"},
        "b": {"type": "string", "x-mcp-header": "tenant"},
    },
}
#: reachable only through anyOf: not a valid position
OFF_CHAIN = {
    "anyOf": [{"type": "object", "properties": {"s": {"type": "string", "x-mcp-header": "S"}}}]
}
SCHEMAS = [PLAIN, ANNOTATED, NESTED, INVALID, DUPLICATE, OFF_CHAIN]


def lookup_of(schemas: dict[str, Mapping[str, Any]]) -> HeaderSchemas:
    return HeaderSchemas(schemas.get)


@pytest.mark.parametrize(
    ("schema", "declares"),
    [
        (PLAIN, False),
        (ANNOTATED, True),
        (NESTED, True),
        (INVALID, False),
        (DUPLICATE, False),
        (OFF_CHAIN, False),
    ],
)
def test_only_schemas_with_valid_annotations_declare_headers(
    schema: Mapping[str, Any], declares: bool
) -> None:
    assert declares_headers(schema) is declares
    lookup = lookup_of({"t": schema})
    assert lookup("t") is (schema if declares else None)


def test_an_unknown_tool_has_no_schema() -> None:
    assert lookup_of({})("missing") is None


def test_a_new_listing_is_judged_again() -> None:
    schemas: dict[str, Mapping[str, Any]] = {"t": PLAIN}
    lookup = lookup_of(schemas)
    assert lookup("t") is None
    schemas["t"] = dict(ANNOTATED)  # the tool now declares a header
    assert lookup("t") is schemas["t"]
    schemas["t"] = dict(PLAIN)  # and no longer does
    assert lookup("t") is None


REQUESTS: list[tuple[dict[str, Any], dict[str, str]]] = [
    ({"text": "x"}, {}),
    ({"region": "eu"}, {}),
    ({"region": "eu"}, {"mcp-param-region": "eu"}),
    ({"region": "eu"}, {"mcp-param-region": "us"}),
    ({}, {"mcp-param-region": "eu"}),
    ({"where": {"zone": "a"}}, {"mcp-param-zone": "b"}),
    ({"where": {"zone": "a"}}, {"mcp-param-zone": "a"}),
    ({"o": {}}, {"mcp-param-o": "x"}),
    ({"a": "1", "b": "2"}, {"mcp-param-tenant": "1"}),
    ({"s": "v"}, {"mcp-param-s": "w"}),
]


@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize(("arguments", "headers"), REQUESTS)
def test_the_sdk_check_refuses_exactly_what_it_refused_on_the_full_schema(
    schema: Mapping[str, Any], arguments: dict[str, Any], headers: dict[str, str]
) -> None:
    full = validate_mcp_param_headers(schema, arguments, headers)
    answered = lookup_of({"t": schema})("t")
    # the SDK skips the check when the lookup answers None
    lean = None if answered is None else validate_mcp_param_headers(answered, arguments, headers)
    assert (full is None) == (lean is None)
    if full is not None and lean is not None:
        assert full.message == lean.message


def test_a_mismatched_header_is_still_refused_for_an_annotated_tool() -> None:
    answered = lookup_of({"t": ANNOTATED})("t")
    assert answered is not None
    assert validate_mcp_param_headers(answered, {"region": "eu"}, {"mcp-param-region": "us"})
