"""Synthetic wire bodies for each provider, so one transport test can run against all of them.

Each :class:`Wire` builds the SSE bytes its provider sends for a text stream, an in-band error and
a complete non-streamed answer, and makes the provider's model against a stub server's URL.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rxllm import SseChatModel
from rxllm.providers.anthropic import AnthropicModel
from rxllm.providers.gemini import GeminiModel
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import StubResponse


def _data(payload: object, *, event: str | None = None, crlf: bool = False) -> bytes:
    line_end = "\r\n" if crlf else "\n"
    head = f"event: {event}{line_end}" if event else ""
    return f"{head}data: {json.dumps(payload)}{line_end}{line_end}".encode()


@dataclass(frozen=True)
class Wire:
    """One provider's wire format."""

    name: str
    make: Callable[..., SseChatModel]
    prelude: Callable[[], list[bytes]]
    text: Callable[[str], bytes]
    finish: Callable[[], list[bytes]]
    error: Callable[[bool], bytes]  # an in-band error event; the flag asks for a retryable one
    complete_body: Callable[[str], dict[str, Any]]  # a non-streamed answer with that text

    def model(self, url: str, **options: Any) -> SseChatModel:
        return self.make(url, **options)

    def stream(self, *pieces: str) -> list[bytes]:
        """A whole, well-formed stream of these text pieces."""
        return [*self.prelude(), *(self.text(p) for p in pieces), *self.finish()]

    def response(self, *pieces: str) -> StubResponse:
        return StubResponse.raw(b"".join(self.stream(*pieces)), split_at=_offsets(self.stream(*pieces)))


def _offsets(events: list[bytes]) -> list[int]:
    out, total = [], 0
    for event in events[:-1]:
        total += len(event)
        out.append(total)
    return out


def openai_chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    payload: dict[str, Any] = {"id": "c1", "model": "m", "choices": [choice]}
    if usage:
        payload["usage"] = usage
    return _data(payload)


OPENAI = Wire(
    name="openai",
    make=lambda url, **o: OpenAiChatModel("gpt-test", base_url=f"{url}/v1", **o),
    prelude=lambda: [openai_chunk({"role": "assistant", "content": ""})],
    text=lambda t: openai_chunk({"content": t}),
    finish=lambda: [
        openai_chunk({}, "stop", {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}),
        b"data: [DONE]\n\n",
    ],
    error=lambda retryable: _data(
        {"error": {"message": "upstream overloaded" if retryable else "bad tool output",
                   "type": "server_error" if retryable else "invalid_request_error"}}
    ),
    complete_body=lambda text: {
        "id": "c1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    },
)

ANTHROPIC = Wire(
    name="anthropic",
    make=lambda url, **o: AnthropicModel("claude-test", base_url=url, **o),
    prelude=lambda: [
        _data({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
               "model": "claude-test", "content": [], "usage": {"input_tokens": 5, "output_tokens": 1}}},
              event="message_start"),
        _data({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
              event="content_block_start"),
    ],
    text=lambda t: _data(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}},
        event="content_block_delta",
    ),
    finish=lambda: [
        _data({"type": "content_block_stop", "index": 0}, event="content_block_stop"),
        _data({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
              event="message_delta"),
        _data({"type": "message_stop"}, event="message_stop"),
    ],
    error=lambda retryable: _data(
        {"type": "error", "error": {"type": "overloaded_error" if retryable else "invalid_request_error",
                                    "message": "Overloaded" if retryable else "bad request"}},
        event="error",
    ),
    complete_body=lambda text: {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 3},
    },
)


def _gemini_chunk(parts: list[dict[str, Any]], finish: str | None = None, usage: bool = False) -> bytes:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    payload: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-test"}
    if usage:
        payload["usageMetadata"] = {"promptTokenCount": 5, "candidatesTokenCount": 3, "totalTokenCount": 8}
    return _data(payload, crlf=True)


GEMINI = Wire(
    name="gemini",
    make=lambda url, **o: GeminiModel("gemini-test", base_url=url, **o),
    prelude=lambda: [],
    text=lambda t: _gemini_chunk([{"text": t}]),
    finish=lambda: [_gemini_chunk([{"text": ""}], "STOP", usage=True)],
    error=lambda retryable: _data(
        {"error": {"code": 503 if retryable else 400, "message": "overloaded" if retryable else "bad request",
                   "status": "UNAVAILABLE" if retryable else "INVALID_ARGUMENT"}},
        crlf=True,
    ),
    complete_body=lambda text: {
        "candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3, "totalTokenCount": 8},
        "modelVersion": "gemini-test",
    },
)

WIRES = [OPENAI, ANTHROPIC, GEMINI]
