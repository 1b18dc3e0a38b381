"""rxllm's types against the installed ``google-genai`` package's own types.

For every genai ``Part`` kind: genai's JSON (camelCase, as the API and ADK write it) validates in
rxllm, and rxllm's JSON validates back in genai to an equal object; genai's ``model_dump()``
(snake_case) validates too. Coverage tests fail when a genai release adds a ``Part`` field, or a
response field ADK Java carries, that rxllm does not have.
"""

from __future__ import annotations

import base64
import json
import warnings
from typing import Any

import pytest
from google.genai import types as genai
from pydantic import ValidationError

from rxllm import (
    Content,
    FinishReason,
    FunctionCallingConfig,
    FunctionCallingConfigMode,
    GenerateContentConfig,
    GoogleSearch,
    HarmBlockMethod,
    HarmBlockThreshold,
    HarmCategory,
    LlmResponse,
    Part,
    SafetySetting,
    ToolCodeExecution,
    ToolConfig,
    UrlContext,
)
from rxllm.agents import Event

B64 = base64.b64encode(b"\x89PNG\r\n").decode()

# One genai-valid JSON value per Part field (camelCase, as genai's API and ADK write it).
PART_KINDS: dict[str, Any] = {
    "text": "hello",
    "thought": True,
    "thoughtSignature": B64,
    "functionCall": {"id": "c1", "name": "get_order", "args": {"order_id": "A17"}, "willContinue": False,
                     "partialArgs": [{"jsonPath": "$.order_id", "stringValue": "A1", "willContinue": True}]},
    "functionResponse": {"id": "c1", "name": "get_order", "response": {"status": "shipped"}, "willContinue": False,
                         "scheduling": "WHEN_IDLE",
                         "parts": [{"inlineData": {"mimeType": "image/png", "data": B64}}]},
    "inlineData": {"mimeType": "image/png", "data": B64, "displayName": "pic.png"},
    "fileData": {"fileUri": "gs://bucket/report.pdf", "mimeType": "application/pdf", "displayName": "report"},
    "executableCode": {"code": "print(1 + 1)", "language": "PYTHON", "id": "x1"},
    "codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "2\n", "id": "x1"},
    "videoMetadata": {"startOffset": "1.5s", "endOffset": "10s", "fps": 2.0, "contentLayers": ["FRAMES"]},
    "mediaResolution": {"level": "MEDIA_RESOLUTION_HIGH", "numTokens": 258},
    "toolCall": {"id": "t1", "toolType": "GOOGLE_SEARCH_WEB", "args": {"q": "weather"}},
    "toolResponse": {"id": "t1", "toolType": "GOOGLE_SEARCH_WEB", "response": {"hits": 3}},
    "partMetadata": {"source": "upload"},
    "audioTranscription": {"text": "hello there", "finished": True, "languageCode": "en"},
    "mediaProcessing": "STATIC",
    "speechMetadata": {"speaker": "Ann", "style": "calm"},
    "documentMetadata": {"startPage": 1, "endPage": 3},
    "spreadsheetMetadata": {"visibleCells": "A1:B2", "sheetIndex": 0},
    "audioMetadata": {"startOffset": "0s", "endOffset": "2s"},
}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def test_every_genai_part_kind_has_a_sample_and_an_rxllm_field() -> None:
    genai_fields = set(genai.Part.model_fields)
    assert {_camel(f) for f in genai_fields} == set(PART_KINDS), "a genai Part kind has no sample here"
    missing = genai_fields - set(Part.model_fields)
    assert not missing, f"genai Part kinds rxllm's Part lacks: {sorted(missing)}"


@pytest.mark.parametrize("kind", sorted(PART_KINDS))
def test_part_kind_round_trips_between_genai_and_rxllm(kind: str) -> None:
    wire = {kind: PART_KINDS[kind]}
    theirs = genai.Part.model_validate(wire)  # the sample is genai-valid
    genai_json = theirs.model_dump_json(by_alias=True, exclude_none=True)

    ours = Part.model_validate_json(genai_json)
    back = genai.Part.model_validate_json(ours.to_json())
    assert back == theirs
    assert json.loads(ours.to_json()) == json.loads(genai_json)
    # genai's default dump (field names) validates too, and so does ours in genai. (Kinds kept as
    # JSON objects keep their keys as they came, so compare through genai.)
    from_snake = Part.model_validate(theirs.model_dump(mode="json", exclude_none=True))
    assert genai.Part.model_validate_json(from_snake.to_json()) == theirs
    assert genai.Part.model_validate(ours.model_dump(mode="json", exclude_none=True)) == theirs


def test_a_content_with_every_part_kind_round_trips() -> None:
    parts = [{kind: value} for kind, value in PART_KINDS.items()]
    theirs = genai.Content.model_validate({"role": "model", "parts": parts})
    ours = Content.from_json(theirs.model_dump_json(by_alias=True, exclude_none=True))
    assert genai.Content.model_validate_json(ours.to_json()) == theirs
    assert Content.from_json(ours.to_json()) == ours


def test_typed_part_kinds_read_as_rxllm_types() -> None:
    part = Part.model_validate({"executableCode": PART_KINDS["executableCode"]})
    assert part.executable_code is not None and part.executable_code.code == "print(1 + 1)"
    assert part.executable_code.language == "PYTHON"
    result = Part.model_validate({"codeExecutionResult": PART_KINDS["codeExecutionResult"]}).code_execution_result
    assert result is not None and result.outcome == "OUTCOME_OK"
    file_data = Part.model_validate({"fileData": PART_KINDS["fileData"]}).file_data
    assert file_data is not None and file_data.file_uri == "gs://bucket/report.pdf"
    video = Part.model_validate({"videoMetadata": PART_KINDS["videoMetadata"]}).video_metadata
    assert video is not None and video.content_layers == ("FRAMES",)


# --- response fields ADK Java's LlmResponse has, from genai's Candidate -----------------------------

CANDIDATE: dict[str, Any] = {
    "content": {"role": "model", "parts": [{"text": "Sunny."}]},
    "finishReason": "STOP",
    "avgLogprobs": -0.25,
    "logprobsResult": {
        "chosenCandidates": [{"token": "Sunny", "tokenId": 7, "logProbability": -0.1}],
        "topCandidates": [{"candidates": [{"token": "Sunny", "tokenId": 7, "logProbability": -0.1}]}],
        "logProbabilitySum": -0.1,
    },
    "groundingMetadata": {
        "webSearchQueries": ["weather Berlin"],
        "groundingChunks": [{"web": {"uri": "https://example.com", "title": "Weather"}}],
        "groundingSupports": [{"segment": {"startIndex": 0, "endIndex": 6, "text": "Sunny."},
                               "groundingChunkIndices": [0], "confidenceScores": [0.9]}],
        "searchEntryPoint": {"renderedContent": "<div/>", "sdkBlob": B64},
        "retrievalMetadata": {"googleSearchDynamicRetrievalScore": 0.7},
    },
}

ADK_RESPONSE_FIELDS = ("grounding_metadata", "avg_logprobs", "logprobs_result", "input_transcription",
                       "output_transcription", "error_code", "finish_reason", "usage_metadata", "model_version",
                       "custom_metadata", "interrupted", "turn_complete", "partial", "content", "error_message")


def test_llm_response_has_adk_javas_fields() -> None:
    assert set(ADK_RESPONSE_FIELDS) <= set(LlmResponse.model_fields)


def test_candidate_fields_validate_from_genai_and_back() -> None:
    candidate = genai.Candidate.model_validate(CANDIDATE)
    fields = ("content", "finishReason", "avgLogprobs", "logprobsResult", "groundingMetadata")
    genai_json = json.loads(candidate.model_dump_json(by_alias=True, exclude_none=True))
    response = LlmResponse.model_validate({k: genai_json[k] for k in fields})
    assert response.avg_logprobs == -0.25 and response.finish_reason is FinishReason.STOP
    assert response.logprobs_result is not None and response.logprobs_result.chosen_candidates is not None
    assert response.logprobs_result.chosen_candidates[0].token == "Sunny"
    grounding = response.grounding_metadata
    assert grounding is not None and grounding.web_search_queries == ("weather Berlin",)
    assert grounding.search_entry_point is not None and grounding.search_entry_point.sdk_blob == b"\x89PNG\r\n"
    back = genai.Candidate.model_validate_json(response.model_dump_json(
        by_alias=True, exclude_none=True, include=set(LlmResponse.model_fields) & {
            "content", "finish_reason", "avg_logprobs", "logprobs_result", "grounding_metadata"}))
    assert back == candidate


def test_transcriptions_validate_from_genai() -> None:
    transcription = genai.Transcription(text="hi", finished=True)
    response = LlmResponse.model_validate({
        "inputTranscription": transcription.model_dump(mode="json", by_alias=True, exclude_none=True),
        "output_transcription": transcription.model_dump(mode="json", exclude_none=True),
    })
    assert response.input_transcription == response.output_transcription
    assert response.input_transcription is not None and response.input_transcription.text == "hi"


def test_unknown_fields_are_rejected_loudly_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="aFutureKind"):
        Part.model_validate({"text": "x", "aFutureKind": {}})
    with pytest.raises(ValidationError, match="notAField"):
        LlmResponse.model_validate({"groundingMetadata": {"notAField": 1}})


def test_unknown_enum_values_are_kept() -> None:
    part = Part.model_validate({"executableCode": {"code": "x", "language": "RUST"}})
    assert part.executable_code is not None and part.executable_code.language == "RUST"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # genai keeps it too, with a warning
        assert genai.Part.model_validate_json(part.to_json()).executable_code is not None


def test_event_with_a_trailing_code_execution_result_is_not_final() -> None:
    code = Part.model_validate({"executableCode": PART_KINDS["executableCode"]})
    result = Part.model_validate({"codeExecutionResult": PART_KINDS["codeExecutionResult"]})
    running = Event(author="a", content=Content(role="model", parts=[code, result]))
    assert running.has_trailing_code_execution_result() and not running.is_final_response()
    answered = Event(author="a", content=Content(role="model", parts=[code, result, Part.from_text("2")]))
    assert not answered.has_trailing_code_execution_result() and answered.is_final_response()
    assert not Event(author="a").has_trailing_code_execution_result()


def test_live_server_fields_validate_from_genai_and_back() -> None:
    go_away = genai.LiveServerGoAway(time_left="10s")
    update = genai.LiveServerSessionResumptionUpdate(new_handle="h-2", resumable=True,
                                                     last_consumed_client_message_index=7)
    cancellation = genai.LiveServerToolCallCancellation(ids=["call_1", "call_2"])
    response = LlmResponse.model_validate({
        "goAway": go_away.model_dump(mode="json", by_alias=True, exclude_none=True),
        "liveSessionResumptionUpdate": update.model_dump(mode="json", by_alias=True, exclude_none=True),
        "tool_call_cancellation": cancellation.model_dump(mode="json", exclude_none=True),
    })
    assert response.go_away is not None and response.go_away.time_left == "10s"
    resumption = response.live_session_resumption_update
    assert resumption is not None and resumption.new_handle == "h-2"
    assert resumption.last_consumed_client_message_index == 7
    assert response.tool_call_cancellation is not None and response.tool_call_cancellation.ids == ("call_1", "call_2")
    assert genai.LiveServerSessionResumptionUpdate.model_validate_json(
        resumption.model_dump_json(by_alias=True, exclude_none=True)) == update
    assert genai.LiveServerToolCallCancellation.model_validate_json(
        response.tool_call_cancellation.model_dump_json(by_alias=True, exclude_none=True)) == cancellation


# --- request-side config: tool_config, safety settings, built-in tools, http options ---------------

GENAI_CONFIG = genai.GenerateContentConfig(
    tool_config=genai.ToolConfig(
        function_calling_config=genai.FunctionCallingConfig(
            mode=genai.FunctionCallingConfigMode.VALIDATED, allowed_function_names=["a", "b"],
            stream_function_call_arguments=True),
        retrieval_config=genai.RetrievalConfig(lat_lng=genai.LatLng(latitude=52.5, longitude=13.4), language_code="de"),
        include_server_side_tool_invocations=True,
    ),
    safety_settings=[
        genai.SafetySetting(category=genai.HarmCategory.HARM_CATEGORY_HARASSMENT,
                            threshold=genai.HarmBlockThreshold.BLOCK_ONLY_HIGH, method=genai.HarmBlockMethod.SEVERITY),
    ],
    tools=[genai.Tool(
        google_search=genai.GoogleSearch(exclude_domains=["spam.example"], search_types=genai.SearchTypes(
            web_search=genai.WebSearch()), blocking_confidence=genai.PhishBlockThreshold.BLOCK_LOW_AND_ABOVE),
        code_execution=genai.ToolCodeExecution(),
        url_context=genai.UrlContext(),
    )],
    http_options=genai.HttpOptions(headers={"X-Trace": "t1"}, extra_body={"labels": {"team": "a"}}),
)
REQUEST_FIELDS = ("tool_config", "safety_settings", "tools", "http_options")


def test_genais_tool_config_safety_settings_and_built_in_tools_round_trip() -> None:
    genai_json = GENAI_CONFIG.model_dump_json(by_alias=True, exclude_none=True, include=set(REQUEST_FIELDS))
    ours = GenerateContentConfig.model_validate_json(genai_json)
    assert ours.tool_config is not None and ours.tool_config.function_calling_config is not None
    assert ours.tool_config.function_calling_config.mode is FunctionCallingConfigMode.VALIDATED
    assert ours.safety_settings is not None and ours.safety_settings[0].threshold == "BLOCK_ONLY_HIGH"
    assert ours.tools is not None and ours.tools[0].google_search is not None
    assert ours.tools[0].google_search.exclude_domains == ("spam.example",)
    assert ours.http_options is not None and ours.http_options.headers == {"X-Trace": "t1"}

    back = genai.GenerateContentConfig.model_validate_json(ours.to_json())
    assert back.tools is not None and back.tools[0].function_declarations == []  # rxllm's default, () -> []
    back.tools[0].function_declarations = None
    for field in REQUEST_FIELDS:
        assert getattr(back, field) == getattr(GENAI_CONFIG, field), field
    # genai's default dump (field names) validates too; the parts kept as JSON objects keep their
    # keys as they came, so compare through genai
    snake = GENAI_CONFIG.model_dump(mode="json", exclude_none=True, include=set(REQUEST_FIELDS))
    from_snake = genai.GenerateContentConfig.model_validate_json(GenerateContentConfig.model_validate(snake).to_json())
    assert from_snake.tools is not None
    from_snake.tools[0].function_declarations = None
    assert all(getattr(from_snake, field) == getattr(GENAI_CONFIG, field) for field in REQUEST_FIELDS)


@pytest.mark.parametrize(("theirs", "ours", "rxllm_only"), [
    (genai.ToolConfig, ToolConfig, set()),
    (genai.FunctionCallingConfig, FunctionCallingConfig, {"parallel_tool_calls"}),
    (genai.SafetySetting, SafetySetting, set()),
    (genai.GoogleSearch, GoogleSearch, set()),
    (genai.ToolCodeExecution, ToolCodeExecution, set()),
    (genai.UrlContext, UrlContext, set()),
])
def test_request_types_have_genais_fields(theirs: type, ours: type, rxllm_only: set[str]) -> None:
    assert set(ours.model_fields) == set(theirs.model_fields) | rxllm_only  # type: ignore[attr-defined]


def test_genais_function_calling_modes_and_harm_enums_are_rxllms() -> None:
    assert {m.value for m in genai.FunctionCallingConfigMode} == {m.value for m in FunctionCallingConfigMode}
    assert {m.value for m in genai.HarmBlockThreshold} == {m.value for m in HarmBlockThreshold}
    assert {m.value for m in genai.HarmBlockMethod} == {m.value for m in HarmBlockMethod}
    assert {m.value for m in genai.HarmCategory} == {m.value for m in HarmCategory}
