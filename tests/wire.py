"""Each provider's wire format for the transport tests, so one test runs against all of them.

Built on :func:`rxllm.testing.sse_turn` (the public scripted-wire helper); adds the in-band error
events and the model factories the tests need.
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
from rxllm.testing import StubResponse, complete_json, sse_turn


@dataclass(frozen=True)
class Wire:
    """One provider's wire format."""

    name: str
    protocol: str
    make: Callable[..., SseChatModel]
    prelude_events: int  # events before the first text event
    error: Callable[[bool], bytes]  # an in-band error event; the flag asks for a retryable one

    def model(self, url: str, **options: Any) -> SseChatModel:
        return self.make(url, **options)

    def stream(self, *pieces: str) -> list[bytes]:
        """A whole, well-formed stream of these text pieces, one ``bytes`` per event."""
        return sse_turn(self.protocol, text=pieces, usage=(5, 3))

    def prelude(self) -> list[bytes]:
        return self.stream("x")[: self.prelude_events]

    def response(self, *pieces: str) -> StubResponse:
        return StubResponse(body=self.stream(*pieces))

    def complete_body(self, text: str) -> dict[str, Any]:
        return complete_json(self.protocol, text, usage=(5, 3))


def _event(payload: object, *, event: str | None = None, line_end: str = "\n") -> bytes:
    head = f"event: {event}{line_end}" if event else ""
    return f"{head}data: {json.dumps(payload)}{line_end}{line_end}".encode()


OPENAI = Wire(
    name="openai",
    protocol="openai-chat",
    make=lambda url, **o: OpenAiChatModel("gpt-test", base_url=f"{url}/v1", **o),
    prelude_events=1,
    error=lambda retryable: _event(
        {
            "error": {
                "message": "upstream overloaded" if retryable else "bad tool output",
                "type": "server_error" if retryable else "invalid_request_error",
            }
        }
    ),
)

ANTHROPIC = Wire(
    name="anthropic",
    protocol="anthropic",
    make=lambda url, **o: AnthropicModel("claude-test", base_url=url, **o),
    prelude_events=2,
    error=lambda retryable: _event(
        {
            "type": "error",
            "error": {
                "type": "overloaded_error" if retryable else "invalid_request_error",
                "message": "Overloaded" if retryable else "bad request",
            },
        },
        event="error",
    ),
)

GEMINI = Wire(
    name="gemini",
    protocol="gemini",
    make=lambda url, **o: GeminiModel("gemini-test", base_url=url, **o),
    prelude_events=0,
    error=lambda retryable: _event(
        {
            "error": {
                "code": 503 if retryable else 400,
                "message": "overloaded" if retryable else "bad request",
                "status": "UNAVAILABLE" if retryable else "INVALID_ARGUMENT",
            }
        },
        line_end="\r\n",
    ),
)

WIRES = [OPENAI, ANTHROPIC, GEMINI]


def openai_chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    """One OpenAI chat-completions stream event with this choice-0 delta."""
    return _event({"id": "c1", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
