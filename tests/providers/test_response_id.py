"""The provider's response id reaches the final ``LlmResponse.response_id`` (genai's name), never a partial.

Streamed: from recorded transcripts (real ids), one or more per provider. Non-streamed: from each
provider's complete body through ``parse_response``.
"""

from __future__ import annotations

import json

import pytest
from transcripts import by_name

from rxllm import Chunk, StreamAggregator
from rxllm.testing import assert_stream_protocol, parser_for, replay_sse

RECORDED_IDS = {
    "openai/chat-text-usage": "chatcmpl-ABfw031mOJeYCSHe4yI2ZjOA6kMJL",
    "openai/chat-tool-call-weather": "chatcmpl-ABfwCgi41eStOcARjZq97ohCEGBPO",
    "openai-compatible/deepseek-reasoner-reasoning-content": "33be18fc-3842-486c-8c29-dd8e578f7f20",
    "openai-responses/text": "resp_67e554a21aa88191b65876ac5e5bbe0406c52f0e511c76ed",
    "openai-responses/function-call": "resp_67e554a155508191900ee113293c4c830794405d35281ae2",
    "anthropic/text-short": "msg_018E1hg8GoVTGEKQY3ovMcSJ",
    "anthropic/tool-use-input-json-delta": "msg_01AusY9WEbCaj3N7Tv5J4YjH",
    "gemini/text": "w1peaMz6INOvnvgPgYfPiQY",
    "gemini/thinking-thought-parts": "beHBaJfEMIi-qtsP3769-Q8",
}


@pytest.mark.parametrize(("name", "response_id"), RECORDED_IDS.items(), ids=list(RECORDED_IDS))
def test_the_final_of_a_recorded_stream_carries_the_providers_response_id(name: str, response_id: str) -> None:
    transcript = by_name(name)
    responses = replay_sse(transcript.raw, parser_for(transcript.protocol))
    final = assert_stream_protocol(responses)
    assert final.response_id == response_id
    assert all(partial.response_id is None for partial in responses[:-1])
    assert json.loads(final.to_json())["responseId"] == response_id  # genai's JSON name


BODIES = {
    "openai-chat": {
        "id": "chatcmpl-body1", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
    },
    "openai-responses": {
        "id": "resp_body1", "object": "response", "status": "completed", "model": "m",
        "output": [{"type": "message", "id": "msg_1", "role": "assistant",
                    "content": [{"type": "output_text", "text": "Hi", "annotations": []}]}],
    },
    "anthropic": {
        "id": "msg_body1", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "Hi"}], "stop_reason": "end_turn",
    },
    "gemini": {
        "candidates": [{"content": {"parts": [{"text": "Hi"}], "role": "model"}, "finishReason": "STOP"}],
        "modelVersion": "m", "responseId": "gem_body1",
    },
}


@pytest.mark.parametrize("protocol", BODIES)
def test_a_non_streamed_body_carries_the_providers_response_id(protocol: str) -> None:
    body = BODIES[protocol]
    aggregator = StreamAggregator()
    for chunk in parser_for(protocol).parse_response(json.dumps(body).encode()):
        aggregator.accept(chunk)
    final = aggregator.finish()
    assert final.text() == "Hi"
    assert final.response_id == body.get("id", body.get("responseId"))


@pytest.mark.parametrize("protocol", BODIES)
def test_a_body_without_an_id_leaves_response_id_unset(protocol: str) -> None:
    body = {key: value for key, value in BODIES[protocol].items() if key not in ("id", "responseId")}
    aggregator = StreamAggregator()
    for chunk in parser_for(protocol).parse_response(json.dumps(body).encode()):
        aggregator.accept(chunk)
    assert aggregator.finish().response_id is None


def test_the_first_response_id_seen_wins_and_empty_ids_are_ignored() -> None:
    aggregator = StreamAggregator()
    for chunk in (Chunk(response_id=""), Chunk(text_delta="a", response_id="r-1"), Chunk(response_id="r-2")):
        aggregator.accept(chunk)
    assert aggregator.finish().response_id == "r-1"
