"""The ADK/genai-shaped types: snake_case construction, camelCase JSON, immutability, helpers."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from pydantic import ValidationError

from rxllm import (
    Blob,
    Content,
    FinishReason,
    FunctionCall,
    FunctionDeclaration,
    FunctionResponse,
    GenerateContentConfig,
    LlmRequest,
    LlmResponse,
    Part,
    ThinkingConfig,
    Tool,
    UsageMetadata,
)

SIGNATURE = b"\x00\xff\x10sig\x80"


def _rich_content() -> Content:
    return Content(
        role="model",
        parts=(
            Part(text="let me think", thought=True, thought_signature=SIGNATURE),
            Part(text="Checking the order."),
            Part(function_call=FunctionCall(id="call_1", name="get_order", args={"order_id": "A17", "n": [1, 2.5]})),
            Part(function_response=FunctionResponse(id="call_1", name="get_order", response={"status": "shipped"})),
            Part(inline_data=Blob(mime_type="image/png", data=b"\x89PNG\r\n\x1a\n")),
        ),
    )


def _full_request() -> LlmRequest:
    return LlmRequest(
        model="gemini-2.5-flash",
        contents=(Content(role="user", parts=(Part.from_text("Where is order A17?"),)),),
        config=GenerateContentConfig(
            system_instruction="Be brief.",
            temperature=0.2,
            top_p=0.9,
            top_k=40,
            max_output_tokens=256,
            stop_sequences=("END",),
            candidate_count=1,
            seed=7,
            tools=(
                Tool(
                    function_declarations=(
                        FunctionDeclaration(
                            name="get_order",
                            description="Look an order up.",
                            parameters={
                                "type": "object",
                                "properties": {
                                    "order_id": {"type": "string", "description": "the order's id"},
                                    "verbose": {"type": "boolean"},
                                },
                                "required": ["order_id"],
                            },
                        ),
                    )
                ),
            ),
            response_mime_type="application/json",
            response_schema={"type": "object"},
            thinking_config=ThinkingConfig(include_thoughts=True, thinking_budget=1024),
        ),
    )


# --- construction by snake_case name, JSON by camelCase alias -------------------------------------


def test_built_by_snake_case_name_and_dumped_by_field_name_unless_by_alias() -> None:
    part = Part(function_call=FunctionCall(name="f"), thought_signature=b"s")
    signature = base64.b64encode(b"s").decode()
    # pydantic's and genai's default: field names
    assert part.model_dump(mode="json", exclude_none=True) == {"function_call": {"name": "f", "args": {}},
                                                               "thought_signature": signature}
    assert json.loads(part.model_dump_json(exclude_none=True)) == part.model_dump(mode="json", exclude_none=True)
    # genai's wire JSON: by_alias, or the ADK-named helpers
    camel = {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": signature}
    assert part.model_dump(mode="json", by_alias=True, exclude_none=True) == camel
    assert json.loads(part.to_json()) == camel
    assert Part.from_json(part.to_json()) == part
    assert Part.model_validate(part.model_dump()) == part  # both spellings validate


def test_sequence_fields_take_lists_and_store_tuples() -> None:
    content = Content(role="user", parts=[Part.from_text("a"), Part.from_text("b")])
    assert isinstance(content.parts, tuple) and [p.text for p in content.parts] == ["a", "b"]
    request = LlmRequest(contents=[content], config=GenerateContentConfig(stop_sequences=["x"], tools=[Tool()]))
    assert isinstance(request.contents, tuple) and request.config.stop_sequences == ("x",)
    assert isinstance(request.config.tools, tuple)
    assert hash(content) == hash(Content(role="user", parts=(Part.from_text("a"), Part.from_text("b"))))


def test_content_json_uses_genai_camel_case_keys_and_base64_bytes() -> None:
    data = json.loads(_rich_content().to_json())
    parts = data["parts"]
    signature = base64.b64encode(SIGNATURE).decode()
    assert parts[0] == {"text": "let me think", "thought": True, "thoughtSignature": signature}
    assert parts[2]["functionCall"] == {"id": "call_1", "name": "get_order", "args": {"order_id": "A17", "n": [1, 2.5]}}
    assert parts[3]["functionResponse"]["response"] == {"status": "shipped"}
    assert parts[4]["inlineData"] == {"mimeType": "image/png", "data": base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()}


@pytest.mark.parametrize("exclude_none", [False, True])
def test_content_round_trips_through_json(exclude_none: bool) -> None:
    content = _rich_content()
    text = content.model_dump_json(exclude_none=exclude_none)
    assert Content.model_validate_json(text) == content
    assert Content.model_validate(json.loads(text)) == content
    assert Content.model_validate(content.model_dump(mode="json", exclude_none=exclude_none)) == content


def test_content_validates_from_genai_json() -> None:
    genai_json = {
        "role": "model",
        "parts": [
            {"text": "plan", "thought": True, "thoughtSignature": base64.b64encode(SIGNATURE).decode()},
            {"functionCall": {"name": "get_order", "args": {"order_id": "A17"}}},
            {"inlineData": {"mimeType": "text/plain", "data": base64.b64encode(b"hi").decode()}},
        ],
    }
    content = Content.model_validate_json(json.dumps(genai_json))
    assert content.parts[0].thought_signature == SIGNATURE
    assert content.parts[1].function_call == FunctionCall(name="get_order", args={"order_id": "A17"})
    assert content.parts[2].inline_data == Blob(mime_type="text/plain", data=b"hi")


def test_request_with_full_config_round_trips() -> None:
    request = _full_request()
    text = request.to_json()
    assert LlmRequest.model_validate_json(text) == request
    assert LlmRequest.model_validate_json(request.model_dump_json()) == request
    config = json.loads(text)["config"]
    assert config["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    assert config["maxOutputTokens"] == 256
    assert config["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 1024}
    declaration = config["tools"][0]["functionDeclarations"][0]
    assert declaration["parameters"]["required"] == ["order_id"]
    assert declaration["parameters"]["properties"]["order_id"] == {"type": "string", "description": "the order's id"}


def test_system_instruction_given_as_str_becomes_content() -> None:
    config = GenerateContentConfig(system_instruction="Be brief.")
    assert isinstance(config.system_instruction, Content)
    assert config.system_instruction.text() == "Be brief."
    from_json = GenerateContentConfig.model_validate_json('{"systemInstruction": "Be brief."}')
    assert from_json.system_instruction == config.system_instruction


def test_function_declarations_lists_every_tools_declarations_in_order() -> None:
    config = GenerateContentConfig(
        tools=(
            Tool(function_declarations=(FunctionDeclaration(name="a"), FunctionDeclaration(name="b"))),
            Tool(function_declarations=(FunctionDeclaration(name="c"),)),
        )
    )
    assert [d.name for d in config.function_declarations()] == ["a", "b", "c"]
    assert GenerateContentConfig().function_declarations() == []


def test_unknown_field_is_rejected() -> None:
    with pytest.raises(ValidationError):
        Part.model_validate({"text": "x", "notAField": 1})


# --- immutability -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "field", "value"),
    [
        (Part(text="x"), "text", "y"),
        (Content(role="user"), "role", "model"),
        (LlmResponse(partial=True), "partial", False),
        (LlmRequest(), "model", "m"),
        (UsageMetadata(total_token_count=1), "total_token_count", 2),
        (FunctionCall(name="f"), "name", "g"),
    ],
)
def test_assigning_a_field_raises(model: Any, field: str, value: object) -> None:
    with pytest.raises(ValidationError, match="frozen"):
        setattr(model, field, value)


def test_sequences_are_tuples() -> None:
    content = Content(parts=[Part(text="a")])
    assert isinstance(content.parts, tuple)
    config = GenerateContentConfig(stop_sequences=["x"], tools=[Tool()])
    assert isinstance(config.stop_sequences, tuple)
    assert isinstance(config.tools, tuple)


# --- factories ---------------------------------------------------------------------------------------


def test_part_factories() -> None:
    assert Part.from_text("hi") == Part(text="hi")
    call = Part.from_function_call("get_order", {"order_id": "A17"}, id="c1")
    assert call.function_call == FunctionCall(id="c1", name="get_order", args={"order_id": "A17"})
    assert Part.from_function_call("f", {}).function_call == FunctionCall(name="f", args={})
    response = Part.from_function_response("get_order", {"status": "shipped"}, id="c1")
    assert response.function_response == FunctionResponse(id="c1", name="get_order", response={"status": "shipped"})


def test_function_call_factory_copies_its_mapping() -> None:
    args = {"a": 1}
    part = Part.from_function_call("f", args)
    args["a"] = 2
    assert part.function_call is not None
    assert part.function_call.args == {"a": 1}


# --- LlmResponse helpers -------------------------------------------------------------------------------


def test_llm_response_helpers() -> None:
    response = LlmResponse(content=_rich_content())
    assert response.text() == "Checking the order."
    assert response.thought_text() == "let me think"
    assert [c.name for c in response.function_calls()] == ["get_order"]
    assert response.content is not None
    assert [r.name for r in response.content.function_responses()] == ["get_order"]


def test_helpers_concatenate_in_part_order_and_skip_other_parts() -> None:
    content = Content(
        parts=(
            Part(text="a"),
            Part(text="T1", thought=True),
            Part(function_call=FunctionCall(name="f")),
            Part(text="b", thought=False),
            Part(text="T2", thought=True),
            Part(thought=True, thought_signature=b"redacted"),
            Part(function_call=FunctionCall(name="g")),
        )
    )
    response = LlmResponse(content=content)
    assert response.text() == "ab"
    assert response.thought_text() == "T1T2"
    assert [c.name for c in response.function_calls()] == ["f", "g"]


def test_helpers_without_content() -> None:
    response = LlmResponse(error_code="X")
    assert response.text() == ""
    assert response.thought_text() == ""
    assert response.function_calls() == []


def test_is_partial() -> None:
    assert LlmResponse(partial=True).is_partial() is True
    assert LlmResponse(partial=False).is_partial() is False
    assert LlmResponse().is_partial() is False


# --- FinishReason --------------------------------------------------------------------------------------

# google-genai's ``types.FinishReason`` members (values equal names there).
_GENAI_FINISH_REASONS = {
    "FINISH_REASON_UNSPECIFIED",
    "STOP",
    "MAX_TOKENS",
    "SAFETY",
    "RECITATION",
    "LANGUAGE",
    "OTHER",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "MALFORMED_FUNCTION_CALL",
    "IMAGE_SAFETY",
    "UNEXPECTED_TOOL_CALL",
    "IMAGE_PROHIBITED_CONTENT",
    "NO_IMAGE",
    "IMAGE_RECITATION",
    "IMAGE_OTHER",
    "TOO_MANY_TOOL_CALLS",
    "MISSING_THOUGHT_SIGNATURE",
}


@pytest.mark.parametrize("reason", list(FinishReason))
def test_finish_reason_value_is_genai_name(reason: FinishReason) -> None:
    assert reason.value == reason.name
    assert reason.name in _GENAI_FINISH_REASONS
    assert reason == reason.name  # a StrEnum compares equal to genai's string


def test_finish_reason_json() -> None:
    response = LlmResponse.model_validate_json('{"finishReason": "MAX_TOKENS"}')
    assert response.finish_reason is FinishReason.MAX_TOKENS
    assert json.loads(response.to_json()) == {"finishReason": "MAX_TOKENS"}


def test_unknown_finish_reasons_and_error_codes_are_kept_as_genai_keeps_them() -> None:
    response = LlmResponse.model_validate_json('{"finishReason": "A_NEWER_REASON", "errorCode": "rate_limit"}')
    assert isinstance(response.finish_reason, FinishReason) and response.finish_reason == "A_NEWER_REASON"
    assert isinstance(response.error_code, FinishReason) and response.error_code == "rate_limit"
    assert json.loads(response.to_json()) == {"finishReason": "A_NEWER_REASON", "errorCode": "rate_limit"}
    assert LlmResponse(error_code=FinishReason.MAX_TOKENS).error_code is FinishReason.MAX_TOKENS
    assert LlmResponse.model_validate({"errorCode": "MAX_TOKENS"}).error_code is FinishReason.MAX_TOKENS
    with pytest.raises(ValidationError):
        LlmResponse.model_validate({"finishReason": 3})


def test_usage_metadata_uses_genai_names() -> None:
    usage = UsageMetadata(prompt_token_count=3, candidates_token_count=4, total_token_count=7, thoughts_token_count=1)
    assert usage.model_dump(mode="json", by_alias=True, exclude_none=True) == {
        "promptTokenCount": 3,
        "candidatesTokenCount": 4,
        "totalTokenCount": 7,
        "thoughtsTokenCount": 1,
    }
