"""Structured output of an ``LlmAgent`` with ``output_schema``: what the request asks for, how the reply is checked.

Both go through the project's structured output (``rxllm._core.schema``): the request carries the
pydantic class as ``response_schema`` (each provider sends its schema in its structured mode), and
the reply is validated by the same ``OutputSchema.parse``.

An agent with ``output_schema`` *and* tools answers through the ``set_model_response`` tool
instead, as ADK Java's ``flows/llmflows/OutputSchema.java`` and ``tools/SetModelResponseTool.java``:
the request declares the tool (its parameters are the schema) and carries
:data:`SET_MODEL_RESPONSE_INSTRUCTION`, without ``response_schema``; the model calls its other
tools, then ``set_model_response`` with the answer; the arguments, validated, are the tool's
result, and the flow adds a final model event whose text is that result as JSON
(``OutputSchema.createFinalModelResponseEvent``).
"""

from __future__ import annotations

import json
from typing import Any

import reactivex
from pydantic import BaseModel, JsonValue, ValidationError

from ..._core.errors import ToolError
from ..._core.schema import output_schema
from ..._core.types import FunctionDeclaration
from ..._rx.direct import defer_now, emit_now
from ..._tools import BaseTool, ToolContext, ToolResult, describe_validation_error

__all__ = [
    "SET_MODEL_RESPONSE",
    "SET_MODEL_RESPONSE_INSTRUCTION",
    "SetModelResponseTool",
    "output_schema_config",
    "structured_response_text",
    "validate_output",
]

SET_MODEL_RESPONSE = "set_model_response"
"""The tool an agent with ``output_schema`` and tools answers through (ADK's ``SetModelResponseTool.NAME``)."""

SET_MODEL_RESPONSE_INSTRUCTION = (
    "IMPORTANT: You have access to other tools, but you must provide your final response using the "
    "set_model_response tool with the required structured format. After using any other tools needed to "
    "complete the task, always call set_model_response with your final answer in the specified schema format."
)
"""The instruction ADK Java's ``OutputSchema`` request processor adds (first in the system instruction)."""


class SetModelResponseTool(BaseTool):
    """The tool the model gives its final, structured answer with (ADK's ``SetModelResponseTool``).

    Its parameters are the JSON schema of ``schema``; a call whose arguments do not validate
    answers the model with an error (it may call again); a valid call's result is its arguments.

    >>> class Verdict(BaseModel):
    ...     ok: bool
    >>> tool = SetModelResponseTool(Verdict)
    >>> tool.declaration().parameters["required"]
    ['ok']
    >>> tool.run({"ok": True}, ToolContext.standalone()).run()
    {'ok': True}
    """

    def __init__(self, schema: type[BaseModel]) -> None:
        super().__init__(
            name=SET_MODEL_RESPONSE,
            description=(
                "Set your final response using the required output schema. After using any other tools needed "
                "to complete the task, always call set_model_response with your final answer in the specified "
                "schema format."
            ),
        )
        self._schema = schema
        self._parameters: dict[str, Any] = dict(output_schema(schema).json_schema)

    @property
    def schema(self) -> type[BaseModel]:
        """The pydantic model class the answer must validate against."""
        return self._schema

    def declaration(self) -> FunctionDeclaration:
        """``set_model_response`` with the schema as its parameters."""
        return FunctionDeclaration(name=self.name, description=self.description, parameters=self._parameters)

    def run(self, args: dict[str, Any], tool_context: ToolContext) -> reactivex.Observable[ToolResult]:
        """Validate the arguments against the schema; emit them (ADK Java returns the arguments as given)."""

        def check() -> reactivex.Observable[ToolResult]:
            try:
                self._schema.model_validate(args)
            except ValidationError as exc:
                raise ToolError(
                    f"set_model_response: the answer does not match the schema {self._schema.__name__}: "
                    f"{describe_validation_error(exc)}"
                ) from exc
            return emit_now(dict(args))

        return defer_now(check)


def structured_response_text(response: dict[str, Any]) -> str:
    """The final event's text for a ``set_model_response`` result: compact JSON, as Jackson writes it.

    >>> structured_response_text({"ok": True, "reason": "café"})
    '{"ok":true,"reason":"café"}'
    """
    return json.dumps(response, separators=(",", ":"), ensure_ascii=False)


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
