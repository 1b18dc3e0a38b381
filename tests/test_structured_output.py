"""Structured output: each provider's native mode on the wire, ``parsed`` on the final and on
partials, error finals for replies that do not validate, and partial objects over every split
of a recorded structured reply.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import reactivex
from pydantic import BaseModel, ValidationError
from reactivex import operators as ops
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from rxllm import (
    INVALID_STRUCTURED_OUTPUT,
    Chunk,
    Content,
    FinishReason,
    GenerateContentConfig,
    LlmRequest,
    LlmResponse,
    Part,
    SseChatModel,
    StreamAggregator,
    StructuredStream,
    structured_responses,
)
from rxllm.providers.anthropic import AnthropicModel
from rxllm.providers.gemini import GeminiModel
from rxllm.providers.openai import OpenAiChatModel, OpenAiResponsesModel
from rxllm.testing import StubResponse, StubServer, assert_stream_protocol, sse_turn


class Item(BaseModel):
    sku: str
    qty: int


class Order(BaseModel):
    id: str
    items: list[Item]
    note: str | None = None


class Point(TypedDict):
    x: int
    y: int


@dataclasses.dataclass
class Weather:
    city: str
    celsius: float


REPLY = '{"id": "A17", "items": [{"sku": "kb-1", "qty": 2}, {"sku": "ms-3", "qty": 1}], "note": "gift — 🎁"}'
EXPECTED = Order(id="A17", items=[Item(sku="kb-1", qty=2), Item(sku="ms-3", qty=1)], note="gift — 🎁")
PIECES = [REPLY[:9], REPLY[9:30], REPLY[30:61], REPLY[61:]]


def _request(schema: Any) -> LlmRequest:
    return LlmRequest(contents=[Content(role="user", parts=[Part.from_text("Order A17?")])],
                      config=GenerateContentConfig(response_schema=schema))


def _responses_events(pieces: list[str]) -> list[bytes]:
    def event(payload: dict[str, object]) -> bytes:
        return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()

    usage = {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}
    return [
        event({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}),
        *[event({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": p})
          for p in pieces],
        event({"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "usage": usage}}),
    ]


def _model(name: str, url: str) -> SseChatModel:
    if name == "openai-chat":
        return OpenAiChatModel("gpt-test", base_url=f"{url}/v1", api_key="sk-test")
    if name == "openai-responses":
        return OpenAiResponsesModel("gpt-test", base_url=f"{url}/v1", api_key="sk-test")
    if name == "anthropic":
        return AnthropicModel("claude-test", base_url=url, api_key="sk-ant-test")
    return GeminiModel("gemini-test", base_url=url, api_key="g-test")


def _body(name: str, pieces: list[str]) -> list[bytes]:
    return _responses_events(pieces) if name == "openai-responses" else sse_turn(name, text=pieces)


PROVIDERS = ["openai-chat", "openai-responses", "anthropic", "gemini"]


def _strict_order_schema(schema: dict[str, Any]) -> None:
    """The strict-mode shape: every object closed, every property required, optionals nullable."""
    assert schema["additionalProperties"] is False and schema["required"] == ["id", "items", "note"]
    assert {"type": "null"} in schema["properties"]["note"]["anyOf"]
    assert "default" not in schema["properties"]["note"]
    item = schema["$defs"]["Item"]
    assert item["additionalProperties"] is False and item["required"] == ["sku", "qty"]


@pytest.mark.parametrize("name", PROVIDERS)
def test_each_provider_sends_its_native_mode_and_the_final_carries_the_instance(name: str) -> None:
    with StubServer([StubResponse(body=_body(name, PIECES))]) as server:
        responses = _model(name, server.url).generate_content(_request(Order), stream=True).pipe(ops.to_list()).run()
        body = server.requests[0].json()
    final = assert_stream_protocol(responses)
    assert isinstance(final.parsed, Order) and final.parsed == EXPECTED and final.error_code is None
    assert final.text() == REPLY  # the raw text is kept
    if name == "openai-chat":
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
        assert fmt["json_schema"]["name"] == "Order"
        _strict_order_schema(fmt["json_schema"]["schema"])
    elif name == "openai-responses":
        fmt = body["text"]["format"]
        assert fmt["type"] == "json_schema" and fmt["strict"] is True and fmt["name"] == "Order"
        _strict_order_schema(fmt["schema"])
    elif name == "anthropic":
        fmt = body["output_config"]["format"]
        assert fmt["type"] == "json_schema" and "tools" not in body
        _strict_order_schema(fmt["schema"])
    else:
        config = body["generationConfig"]
        assert config["responseMimeType"] == "application/json"
        assert config["responseJsonSchema"] == Order.model_json_schema()


@pytest.mark.parametrize("name", PROVIDERS)
def test_partials_carry_the_object_so_far_and_only_new_text(name: str) -> None:
    with StubServer([StubResponse(body=_body(name, PIECES))]) as server:
        responses = _model(name, server.url).generate_content(_request(Order), stream=True).pipe(ops.to_list()).run()
    partials = responses[:-1]
    assert [p.text() for p in partials] == PIECES
    assert partials[0].parsed == {"id": "A"}  # an incomplete string shows as far as it came
    assert partials[-1].parsed == json.loads(REPLY)
    assert all(isinstance(p.parsed, dict) for p in partials)


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_list_schema_is_wrapped_on_the_wire_and_unwrapped_in_parsed(name: str) -> None:
    pieces = ['{"items": [{"sku": "kb', '-1", "qty": 2}, {"sku"', ': "ms-3", "qty": 1}]}']
    with StubServer([StubResponse(body=_body(name, pieces))]) as server:
        responses = _model(name, server.url).generate_content(_request(list[Item]), stream=True).pipe(
            ops.to_list()).run()
        body = server.requests[0].json()
    final = responses[-1]
    assert final.parsed == [Item(sku="kb-1", qty=2), Item(sku="ms-3", qty=1)]
    assert [p.parsed for p in responses[:-1]] == [[{"sku": "kb"}], [{"sku": "kb-1", "qty": 2}, {}],
                                                  [{"sku": "kb-1", "qty": 2}, {"sku": "ms-3", "qty": 1}]]
    sent = json.dumps(body)
    assert '"required": ["items"]' in sent


def test_stream_false_carries_the_instance_too() -> None:
    from rxllm.testing import complete_json

    body = [json.dumps(complete_json("openai-chat", REPLY)).encode()]
    with StubServer([StubResponse(headers={"content-type": "application/json"}, body=body)]) as server:
        [only] = _model("openai-chat", server.url).generate_content(_request(Order)).pipe(ops.to_list()).run()
        assert server.requests[0].json()["response_format"]["json_schema"]["strict"] is True
    assert only.partial is None and only.parsed == EXPECTED


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_reply_that_does_not_validate_is_an_error_final_not_an_error(name: str) -> None:
    pieces = ['{"id": "A17", ', '"items": "none"}']
    with StubServer([StubResponse(body=_body(name, pieces))]) as server:
        responses = _model(name, server.url).generate_content(_request(Order), stream=True).pipe(ops.to_list()).run()
    final = assert_stream_protocol(responses)
    assert final.error_code == INVALID_STRUCTURED_OUTPUT and isinstance(final.error_code, FinishReason)
    assert final.error_message is not None and "Order" in final.error_message and "items" in final.error_message
    assert final.parsed is None and final.text() == "".join(pieces)


def test_a_reply_that_is_not_json_is_an_error_final() -> None:
    with StubServer([StubResponse(body=sse_turn("openai-chat", text=["Sorry, ", "no."]))]) as server:
        responses = _model("openai-chat", server.url).generate_content(_request(Order), stream=True).pipe(
            ops.to_list()).run()
    assert [r.parsed for r in responses[:-1]] == [None, None]
    assert responses[-1].error_code == INVALID_STRUCTURED_OUTPUT and responses[-1].text() == "Sorry, no."


def test_without_a_schema_parsed_stays_none() -> None:
    with StubServer([StubResponse(body=sse_turn("openai-chat", text=PIECES))]) as server:
        responses = _model("openai-chat", server.url).generate_content(
            LlmRequest(contents=[Content(role="user", parts=[Part.from_text("hi")])]), stream=True).pipe(
            ops.to_list()).run()
    assert all(r.parsed is None for r in responses)


# --- schema forms ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "reply", "expected"),
    [
        (Point, '{"x": 1, "y": 2}', {"x": 1, "y": 2}),
        (Weather, '{"city": "Paris", "celsius": 21.5}', Weather(city="Paris", celsius=21.5)),
        (list[int], '{"items": [1, 2, 3]}', [1, 2, 3]),
        ({"type": "object", "properties": {"a": {"type": "integer"}}}, '{"a": 1}', {"a": 1}),
    ],
    ids=["typeddict", "dataclass", "list-of-int", "json-schema-dict"],
)
def test_every_schema_form_parses(schema: Any, reply: str, expected: object) -> None:
    stream = StructuredStream(schema)
    final = stream.finish(LlmResponse(content=Content(role="model", parts=[Part.from_text(reply)])))
    assert final.parsed == expected and final.error_code is None


def test_a_schema_pydantic_cannot_handle_is_refused_at_construction() -> None:
    with pytest.raises(ValidationError, match="response_schema"):
        GenerateContentConfig(response_schema=3)  # type: ignore[arg-type]


def test_the_config_serialises_the_json_schema_and_reads_it_back() -> None:
    config = GenerateContentConfig(response_schema=Order)
    data = json.loads(config.to_json())
    assert data["responseSchema"] == Order.model_json_schema()
    assert GenerateContentConfig.from_json(config.to_json()).response_schema == Order.model_json_schema()


def test_a_final_that_ended_in_error_or_calls_tools_is_passed_through() -> None:
    stream = StructuredStream(Order)
    cut = LlmResponse(content=Content(role="model", parts=[Part.from_text('{"id": "A')]),
                      error_code=FinishReason.MAX_TOKENS, error_message="limit")
    assert stream.finish(cut) is cut
    calls = LlmResponse(content=Content(role="model", parts=[Part.from_function_call("get_order", {"id": "A17"})]))
    assert stream.finish(calls) is calls


# --- partial objects over every split of a recorded reply --------------------------------------------


def _json_type(value: object) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


def _same_shape_prefix(partial: object, final: object) -> None:
    """Every value of ``partial`` has the JSON type of the final's value at the same place, and
    strings are prefixes of the final's strings (a partial never shows a wrong value)."""
    assert _json_type(partial) == _json_type(final), (partial, final)
    if isinstance(partial, dict):
        assert isinstance(final, dict)
        for key, value in partial.items():
            assert key in final, (key, final)
            _same_shape_prefix(value, final[key])
    elif isinstance(partial, list):
        assert isinstance(final, list) and len(partial) <= len(final)
        for got, want in zip(partial, final, strict=False):
            _same_shape_prefix(got, want)
    elif isinstance(partial, str):
        assert isinstance(final, str) and final.startswith(partial), (partial, final)


def _split_stream(pieces: list[str]) -> list[LlmResponse]:
    aggregator = StreamAggregator()

    def emit() -> list[LlmResponse]:
        out: list[LlmResponse] = []
        for piece in pieces:
            out.extend(aggregator.accept(Chunk(text_delta=piece)))
        out.append(aggregator.finish())
        return out

    return structured_responses(reactivex.defer(lambda _: reactivex.from_iterable(emit())), Order).pipe(
        ops.to_list()).run()


def test_partial_objects_at_every_byte_offset_of_a_recorded_reply() -> None:
    expected_json = json.loads(REPLY)
    encoded = REPLY.encode()
    for offset in range(1, len(encoded)):
        head, tail = encoded[:offset], encoded[offset:]
        try:  # split on a byte offset; a split inside a UTF-8 sequence moves to the character edge
            pieces = [head.decode(), tail.decode()]
        except UnicodeDecodeError:
            continue
        responses = _split_stream(pieces)
        partials, final = responses[:-1], responses[-1]
        assert [p.text() for p in partials] == pieces
        assert final.parsed == EXPECTED, offset
        assert partials[-1].parsed == expected_json
        first = partials[0].parsed
        if first is not None:
            _same_shape_prefix(first, expected_json)


def test_partial_objects_with_one_character_per_chunk_only_grow() -> None:
    responses = _split_stream(list(REPLY))
    expected_json = json.loads(REPLY)
    seen = [r.parsed for r in responses[:-1]]
    assert seen[0] == {} and seen[-1] == expected_json
    for parsed in seen:
        if parsed is not None:
            _same_shape_prefix(parsed, expected_json)
    assert responses[-1].parsed == EXPECTED


def test_a_retry_before_the_first_item_starts_a_fresh_parse() -> None:
    attempts: list[int] = []

    def source(_: Any) -> reactivex.Observable[LlmResponse]:
        attempts.append(1)
        if len(attempts) == 1:
            return reactivex.throw(RuntimeError("first attempt fails"))
        aggregator = StreamAggregator()
        items = [*aggregator.accept(Chunk(text_delta=REPLY)), aggregator.finish()]
        return reactivex.from_iterable(items)

    stream = structured_responses(reactivex.defer(source), Order)
    with pytest.raises(RuntimeError):
        stream.pipe(ops.to_list()).run()
    responses = stream.pipe(ops.to_list()).run()
    assert responses[-1].parsed == EXPECTED and responses[0].parsed == json.loads(REPLY)


# --- AiService(output_type=...) ---------------------------------------------------------------------


def test_ai_service_output_type_asks_for_the_schema_and_the_final_carries_the_instance() -> None:
    from reactivex.scheduler import ImmediateScheduler

    from rxllm.service import AiService, FinalResponseEvent

    with StubServer([StubResponse(body=sse_turn("openai-chat", text=PIECES)),
                     StubResponse(body=sse_turn("openai-chat", text=['{"id": 1}']))]) as server:
        service = AiService(_model("openai-chat", server.url), output_type=Order, tool_scheduler=ImmediateScheduler())
        events = service.stream("Order A17?").pipe(ops.to_list()).run()
        bad = service.stream("Order A17?").pipe(ops.to_list()).run()
        body = server.requests[0].json()
    final = events[-1]
    assert isinstance(final, FinalResponseEvent) and final.response.parsed == EXPECTED
    assert body["response_format"]["json_schema"]["name"] == "Order"
    assert service.output_type is Order
    last = bad[-1]
    assert isinstance(last, FinalResponseEvent) and last.response.error_code == INVALID_STRUCTURED_OUTPUT


def test_ai_service_refuses_an_output_type_without_a_schema() -> None:
    from rxllm import ConfigurationError
    from rxllm.service import AiService
    from rxllm.testing import ScriptedLlm

    with pytest.raises(ConfigurationError, match="no JSON schema"):
        AiService(ScriptedLlm([]), output_type=type("Opaque", (), {}))
