"""Every recorded transcript, served by a real loopback server and read by the real model on both transports.

Each transcript in ``tests/fixtures/transcripts`` (its ``SOURCES.md`` says where each came from) is
served whole and cut at awkward byte offsets (inside multi-byte UTF-8 characters, between ``\\r``
and ``\\n``, at seeded random points), each piece its own HTTP chunk, and read through
:class:`~rxllm.HttpTransport` and :class:`~rxllm.AsyncHttpTransport`. The model's output must follow
the stream contract and its final must match the reference aggregate (``.expected.json``) and the
pure replay of the same bytes.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from reactivex import operators as ops
from reactivex.scheduler import ImmediateScheduler
from transcripts import Transcript, load_manifest, split_at, split_randomly

from rxllm import AsyncHttpTransport, HttpTransport, LlmRequest, LlmResponse, SseChatModel
from rxllm.providers.anthropic import AnthropicModel
from rxllm.providers.gemini import GeminiModel
from rxllm.providers.openai import OpenAiChatModel, OpenAiResponsesModel
from rxllm.testing import StubResponse, StubServer, assert_stream_protocol, parser_for, replay_sse

Transport = HttpTransport | AsyncHttpTransport



def _on(transport: Transport) -> dict[str, Any]:
    """The model options for ``transport`` (the threaded one reads on the calling thread)."""
    if isinstance(transport, HttpTransport):
        return {"transport": transport, "scheduler": ImmediateScheduler()}
    return {"transport": transport}


MODELS: dict[str, Callable[[str, Transport], SseChatModel]] = {
    "openai-chat": lambda url, transport: OpenAiChatModel("m", base_url=f"{url}/v1", **_on(transport)),
    "openai-responses": lambda url, transport: OpenAiResponsesModel("m", base_url=f"{url}/v1", **_on(transport)),
    "anthropic": lambda url, transport: AnthropicModel("m", base_url=url, **_on(transport)),
    "gemini": lambda url, transport: GeminiModel("m", base_url=url, **_on(transport)),
}

TRANSCRIPTS = load_manifest()


def _splits(data: bytes) -> dict[str, list[bytes]]:
    rng = random.Random(len(data))
    inside_utf8 = [i for i, byte in enumerate(data) if 0x80 <= byte < 0xC0]
    between_cr_lf = [i + 1 for i in range(len(data) - 1) if data[i : i + 2] == b"\r\n"]
    return {
        "whole": [data],
        "inside-utf8": split_at(data, inside_utf8[:400]),
        "between-cr-lf": split_at(data, between_cr_lf[:400]),
        "random-16": split_randomly(data, rng, 16),
        "random-300": split_randomly(data, rng, 300),
    }


@pytest.fixture(scope="module", params=["threads", "asyncio"])
def transport(request: pytest.FixtureRequest) -> Iterator[Transport]:
    made: Transport = HttpTransport() if request.param == "threads" else AsyncHttpTransport()
    yield made
    made.close()


def test_every_protocol_has_a_model() -> None:
    assert {t.protocol for t in TRANSCRIPTS} == set(MODELS)
    assert len(TRANSCRIPTS) == 38  # the fixture folder's manifest (see test_transcript_fixtures.py)


def _summary(final: LlmResponse) -> dict[str, Any]:
    calls = final.function_calls()
    return {
        "text": final.text(),
        "thinking": final.thought_text(),
        "calls": [(c.name, c.args) for c in calls],
        "finish_reason": (final.custom_metadata or {}).get("finish_reason"),
        "usage": final.usage_metadata,
        "error_code": final.error_code,
        "response_id": final.response_id,
    }


@pytest.mark.parametrize("transcript", TRANSCRIPTS, ids=lambda t: t.name)
def test_transcript_through_the_real_model(
    stub_server: StubServer, transport: Transport, transcript: Transcript
) -> None:
    expected = transcript.expected
    reference = replay_sse(transcript.raw, parser_for(transcript.protocol))
    model = MODELS[transcript.protocol](stub_server.url, transport)
    for split, pieces in _splits(transcript.raw).items():
        stub_server.enqueue(StubResponse(body=pieces))
        responses = model.generate_content(LlmRequest(), stream=True).pipe(ops.to_list()).run()
        final = assert_stream_protocol(responses)
        assert _summary(final) == _summary(reference[-1]), split
        assert [r.text() for r in responses[:-1]] == [r.text() for r in reference[:-1]], split
        assert final.text() == expected["text"], split
        assert final.thought_text() == (expected["thinking"] or ""), split
        calls = final.function_calls()
        assert [(c.name, c.args) for c in calls] == [(t["name"], t["arguments"]) for t in expected["tool_calls"]]
        for call, reference_call in zip(calls, expected["tool_calls"], strict=True):
            if reference_call["id"] is not None:
                assert call.id == reference_call["id"]
            else:
                assert call.id and call.id.startswith("adk-")
        assert (final.custom_metadata or {}).get("finish_reason") == expected["finish_reason"], split
        assert (final.usage_metadata is None) == (expected["usage"] is None), split
        text_partials = sum(1 for r in responses[:-1] if r.text())
        assert text_partials == expected["chunks_with_text"], split
