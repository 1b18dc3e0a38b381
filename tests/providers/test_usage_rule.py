"""One rule for usage figures, for every provider: a figure that is not a token count (negative,
past 2**53-1, a string, a bool) or a usage report that is not an object is dropped and logged
at WARNING; the answer it came with is kept, and so are the good figures. Streams over a real
loopback server."""

from __future__ import annotations

import json
import logging

import pytest
from reactivex import operators as ops

from rxllm import Content, HttpTransport, LlmRequest, Part, RetryPolicy, SseChatModel
from rxllm.providers.anthropic import AnthropicModel
from rxllm.providers.gemini import GeminiModel
from rxllm.providers.openai import OpenAiChatModel, OpenAiResponsesModel
from rxllm.testing import StubResponse, StubServer

REQUEST = LlmRequest(contents=(Content(role="user", parts=(Part.from_text("hi"),)),))


def sse(*events: tuple[str | None, object]) -> StubResponse:
    body = []
    for name, payload in events:
        head = f"event: {name}\n" if name else ""
        data = payload if isinstance(payload, str) else json.dumps(payload)
        body.append(f"{head}data: {data}\n\n".encode())
    return StubResponse(body=body)


def openai_chat() -> tuple[StubResponse, dict[str, int | None]]:
    delta = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]}
    end = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": -1, "completion_tokens": 2**70, "total_tokens": 7,
                     "completion_tokens_details": {"reasoning_tokens": "3"}}}
    return sse((None, delta), (None, end), (None, "[DONE]")), {"prompt": None, "candidates": None, "total": 7}


def anthropic() -> tuple[StubResponse, dict[str, int | None]]:
    return sse(
        ("message_start", {"type": "message_start", "message": {"id": "m1", "model": "c", "role": "assistant",
                                                                 "content": [], "usage": {"input_tokens": "12",
                                                                                          "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "Hi"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": 4}}),
        ("message_stop", {"type": "message_stop"}),
    ), {"prompt": None, "candidates": 4}


def gemini() -> tuple[StubResponse, dict[str, int | None]]:
    chunk = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi"}]}, "finishReason": "STOP"}],
             "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": True, "totalTokenCount": 2**70}}
    return sse((None, chunk)), {"prompt": 5, "candidates": None, "total": None}


def gemini_usage_not_an_object() -> tuple[StubResponse, dict[str, int | None]]:
    chunk = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi"}]}, "finishReason": "STOP"}],
             "usageMetadata": [1, 2]}
    return sse((None, chunk)), {}


def responses() -> tuple[StubResponse, dict[str, int | None]]:
    done = {"type": "response.completed", "response": {"id": "r", "model": "m", "status": "completed",
                                                        "usage": {"input_tokens": 3, "output_tokens": -2,
                                                                  "output_tokens_details": []}}}
    return sse(
        ("response.output_text.delta", {"type": "response.output_text.delta", "output_index": 0,
                                        "content_index": 0, "delta": "Hi"}),
        ("response.completed", done),
    ), {"prompt": 3, "candidates": None}


CASES = {
    "openai-chat": (lambda url, t: OpenAiChatModel("m", base_url=url + "/v1", api_key="sk-test-not-real",
                                                   transport=t, retry_policy=RetryPolicy.never()), openai_chat),
    "openai-responses": (lambda url, t: OpenAiResponsesModel("m", base_url=url + "/v1", api_key="sk-test-not-real",
                                                             transport=t, retry_policy=RetryPolicy.never()), responses),
    "anthropic": (lambda url, t: AnthropicModel("c", base_url=url, api_key="sk-test-not-real", transport=t,
                                                retry_policy=RetryPolicy.never()), anthropic),
    "gemini": (lambda url, t: GeminiModel("g", base_url=url, api_key="sk-test-not-real", transport=t,
                                          retry_policy=RetryPolicy.never()), gemini),
    "gemini-usage-list": (lambda url, t: GeminiModel("g", base_url=url, api_key="sk-test-not-real", transport=t,
                                                     retry_policy=RetryPolicy.never()), gemini_usage_not_an_object),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_usage_figure_is_dropped_and_logged_and_the_answer_kept(
    case: str, caplog: pytest.LogCaptureFixture
) -> None:
    build, body = CASES[case]
    response, expected = body()
    transport = HttpTransport(max_concurrent_streams=2)
    try:
        with StubServer([response]) as server, caplog.at_level(logging.WARNING, logger="rxllm"):
            model: SseChatModel = build(server.url, transport)
            responses = model.generate_content(REQUEST, stream=True).pipe(ops.to_list()).run()
    finally:
        transport.close()
    final = responses[-1]
    assert not final.partial and final.text() == "Hi" and final.error_code is None
    usage = final.usage_metadata
    figures = {"prompt": "prompt_token_count", "candidates": "candidates_token_count", "total": "total_token_count"}
    for short, value in expected.items():
        assert usage is not None and getattr(usage, figures[short]) == value, (short, usage)
    assert usage is None or all(
        v is None or 0 <= v <= 2**53 - 1 for v in usage.model_dump().values() if isinstance(v, int)
    )
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "usage" in r.getMessage()]
    assert warnings, "the dropped figure was not logged"
    assert all("the rest of the answer is kept" in r.getMessage() for r in warnings)
