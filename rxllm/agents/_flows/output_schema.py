"""Structured output of an ``LlmAgent`` with ``output_schema``: what the request asks for, how the reply is checked.

Both go through the project's structured output (``rxllm._core.schema``): the request carries the
pydantic class as ``response_schema`` (each provider sends its schema in its structured mode), and
the reply is validated by the same ``OutputSchema.parse``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, JsonValue

from ..._core.schema import output_schema

__all__ = ["output_schema_config", "validate_output"]


def output_schema_config(schema: type[BaseModel]) -> dict[str, Any]:
    """The ``GenerateContentConfig`` fields asking for JSON of ``schema``.

    >>> class Verdict(BaseModel):
    ...     ok: bool
    >>> config = output_schema_config(Verdict)
    >>> config["response_mime_type"], config["response_schema"] is Verdict
    ('application/json', True)
    """
    return {"response_mime_type": "application/json", "response_schema": schema}


def validate_output(schema: type[BaseModel], text: str) -> JsonValue:
    """The reply ``text`` validated against ``schema``, as JSON-able data.

    Raises:
        ValueError: the text is not JSON of the schema (pydantic's ``ValidationError`` included).

    >>> class Verdict(BaseModel):
    ...     ok: bool
    >>> validate_output(Verdict, '{"ok": true}')
    {'ok': True}
    """
    value = output_schema(schema).parse(text.strip())
    dumped: JsonValue = value.model_dump(mode="json", by_alias=True) if isinstance(value, BaseModel) else value
    return dumped
