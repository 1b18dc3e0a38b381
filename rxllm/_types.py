"""ADK/genai-shaped data types.

Every model is immutable, is built by snake_case field name
(``Part(function_call=...)``), and validates from / dumps to genai's camelCase JSON
(``model_dump(mode="json")`` and ``model_dump_json()`` use the camelCase aliases and drop
``None`` fields when called with ``exclude_none=True``), so ADK and genai JSON round-trips.
Bytes (``thought_signature``, ``Blob.data``) travel as base64 in JSON, as in genai.

>>> from rxllm import Content, Part
>>> c = Content(role="user", parts=[Part.from_text("Where is order A17?")])
>>> c.model_dump_json(exclude_none=True)
'{"role":"user","parts":[{"text":"Where is order A17?"}]}'
>>> Content.model_validate_json(c.model_dump_json()) == c
True
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator
from pydantic.alias_generators import to_camel

__all__ = [
    "Blob",
    "Content",
    "FinishReason",
    "FunctionCall",
    "FunctionDeclaration",
    "FunctionResponse",
    "GenerateContentConfig",
    "LlmRequest",
    "LlmResponse",
    "Part",
    "ThinkingConfig",
    "Tool",
    "UsageMetadata",
]

Role = Literal["user", "model", "system", "tool"] | str


class _Model(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        ser_json_bytes="base64",
        val_json_bytes="base64",
    )


class FinishReason(enum.StrEnum):
    """Why the model stopped, with genai's values."""

    FINISH_REASON_UNSPECIFIED = "FINISH_REASON_UNSPECIFIED"
    STOP = "STOP"
    MAX_TOKENS = "MAX_TOKENS"
    SAFETY = "SAFETY"
    RECITATION = "RECITATION"
    LANGUAGE = "LANGUAGE"
    OTHER = "OTHER"
    BLOCKLIST = "BLOCKLIST"
    PROHIBITED_CONTENT = "PROHIBITED_CONTENT"
    SPII = "SPII"
    MALFORMED_FUNCTION_CALL = "MALFORMED_FUNCTION_CALL"
    IMAGE_SAFETY = "IMAGE_SAFETY"
    UNEXPECTED_TOOL_CALL = "UNEXPECTED_TOOL_CALL"


class Blob(_Model):
    """Inline bytes with their MIME type."""

    mime_type: str
    data: bytes


class FunctionCall(_Model):
    """A tool call the model made. ``args`` is the parsed JSON object."""

    id: str | None = None
    name: str
    args: dict[str, JsonValue] = Field(default_factory=dict)


class FunctionResponse(_Model):
    """A tool's result, sent back to the model. ``id`` matches the call's id."""

    id: str | None = None
    name: str
    response: dict[str, JsonValue] = Field(default_factory=dict)


class Part(_Model):
    """One piece of a :class:`Content`: text, thought text, a function call or response, or bytes.

    A part with ``thought=True`` holds reasoning text. A thought part with a
    ``thought_signature`` and no text is a provider's opaque (redacted) reasoning block.
    """

    text: str | None = None
    thought: bool | None = None
    thought_signature: bytes | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None
    inline_data: Blob | None = None

    @classmethod
    def from_text(cls, text: str) -> Part:
        """A text part.

        >>> Part.from_text("hi").text
        'hi'
        """
        return cls(text=text)

    @classmethod
    def from_function_call(cls, name: str, args: Mapping[str, Any], id: str | None = None) -> Part:
        """A function-call part.

        >>> Part.from_function_call("get_order", {"order_id": "A17"}).function_call.args
        {'order_id': 'A17'}
        """
        return cls(function_call=FunctionCall(id=id, name=name, args=dict(args)))

    @classmethod
    def from_function_response(cls, name: str, response: Mapping[str, Any], id: str | None = None) -> Part:
        """A function-response part, the result of the call with the same ``id``."""
        return cls(function_response=FunctionResponse(id=id, name=name, response=dict(response)))


class Content(_Model):
    """A turn's content: a role (``"user"`` or ``"model"``) and its parts."""

    role: Role | None = None
    parts: tuple[Part, ...] = ()

    def text(self) -> str:
        """The concatenated answer text of the parts (thought parts excluded)."""
        return "".join(p.text for p in self.parts if p.text is not None and not p.thought)

    def thought_text(self) -> str:
        """The concatenated text of the thought parts."""
        return "".join(p.text for p in self.parts if p.text is not None and p.thought)

    def function_calls(self) -> list[FunctionCall]:
        """The parts' function calls, in order."""
        return [p.function_call for p in self.parts if p.function_call is not None]

    def function_responses(self) -> list[FunctionResponse]:
        """The parts' function responses, in order."""
        return [p.function_response for p in self.parts if p.function_response is not None]


class FunctionDeclaration(_Model):
    """A tool the model may call. ``parameters`` is a JSON Schema object."""

    name: str
    description: str | None = None
    parameters: dict[str, JsonValue] | None = None


class Tool(_Model):
    """A group of function declarations, as genai's ``Tool``."""

    function_declarations: tuple[FunctionDeclaration, ...] = ()


class ThinkingConfig(_Model):
    """Reasoning options: whether to return thought text, and a token budget."""

    include_thoughts: bool | None = None
    thinking_budget: int | None = None


class GenerateContentConfig(_Model):
    """Generation options of a request. ``system_instruction`` also accepts a plain string."""

    system_instruction: Content | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_output_tokens: int | None = None
    stop_sequences: tuple[str, ...] | None = None
    candidate_count: int | None = None
    seed: int | None = None
    tools: tuple[Tool, ...] | None = None
    response_mime_type: str | None = None
    response_schema: dict[str, JsonValue] | None = None
    thinking_config: ThinkingConfig | None = None

    @field_validator("system_instruction", mode="before")
    @classmethod
    def _system_instruction_from_str(cls, value: object) -> object:
        if isinstance(value, str):
            return Content(role="system", parts=(Part(text=value),))
        return value

    def function_declarations(self) -> list[FunctionDeclaration]:
        """Every function declaration of every tool, in order."""
        return [d for tool in self.tools or () for d in tool.function_declarations]


class LlmRequest(_Model):
    """What a :class:`BaseLlm` is asked: the model name (wins over the model's own when set),
    the conversation so far, and the generation config."""

    model: str | None = None
    contents: tuple[Content, ...] = ()
    config: GenerateContentConfig = Field(default_factory=GenerateContentConfig)


class UsageMetadata(_Model):
    """Token counts of one model call, genai's names."""

    prompt_token_count: int | None = None
    candidates_token_count: int | None = None
    total_token_count: int | None = None
    thoughts_token_count: int | None = None
    cached_content_token_count: int | None = None


class LlmResponse(_Model):
    """One item of ``generate_content``: ADK Java's ``LlmResponse`` fields.

    ``partial=True`` marks a streamed delta (only new text, no function calls, no usage);
    the final aggregate has ``partial`` unset (``None``).
    """

    content: Content | None = None
    partial: bool | None = None
    turn_complete: bool | None = None
    error_code: str | None = None
    error_message: str | None = None
    finish_reason: FinishReason | None = None
    usage_metadata: UsageMetadata | None = None
    interrupted: bool | None = None
    model_version: str | None = None
    custom_metadata: dict[str, JsonValue] | None = None

    def is_partial(self) -> bool:
        """``partial`` as a bool (unset counts as final)."""
        return bool(self.partial)

    def text(self) -> str:
        """The answer text (thought parts excluded); ``""`` without content."""
        return self.content.text() if self.content is not None else ""

    def thought_text(self) -> str:
        """The text of the thought parts; ``""`` without content."""
        return self.content.thought_text() if self.content is not None else ""

    def function_calls(self) -> list[FunctionCall]:
        """The function calls of the content, in order."""
        return self.content.function_calls() if self.content is not None else []

