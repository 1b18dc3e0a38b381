"""Structured output of an ``LlmAgent`` with ``output_schema``: what the request asks for, how the reply is checked.

One small place, so the project's shared structured-output function can replace it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, JsonValue, ValidationError

__all__ = ["output_schema_config", "validate_output"]


def output_schema_config(schema: type[BaseModel]) -> dict[str, Any]:
    """The ``GenerateContentConfig`` fields asking for JSON of ``schema``.

    >>> class Verdict(BaseModel):
    ...     ok: bool
    >>> output_schema_config(Verdict)["response_mime_type"]
    'application/json'
    """
    return {"response_mime_type": "application/json", "response_schema": schema.model_json_schema()}


def validate_output(schema: type[BaseModel], text: str) -> JsonValue:
    """The reply ``text`` validated against ``schema``, as JSON-able data.

    Raises:
        ValueError: the text is not JSON of the schema (pydantic's ``ValidationError``).

    >>> class Verdict(BaseModel):
    ...     ok: bool
    >>> validate_output(Verdict, '{"ok": true}')
    {'ok': True}
    """
    try:
        value = schema.model_validate_json(text.strip())
    except ValidationError as exc:
        raise ValueError(str(exc)) from exc
    dumped: JsonValue = value.model_dump(mode="json", by_alias=True)
    return dumped
