"""Checks that run before the policy: argument schemas and per-tool Python validators."""

from signoff.checks.schema import ArgsSchema, FunctionArgs, JSONSchemaArgs, schema_for

__all__ = ["ArgsSchema", "FunctionArgs", "JSONSchemaArgs", "schema_for"]
