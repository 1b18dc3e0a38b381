"""Transcript replay: recorded SSE bytes through the real decoder, parser and aggregator."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .._core.errors import ConfigurationError, StreamInterruptedError
from .._core.types import LlmResponse
from .._models.aggregation import StreamAggregator
from .._models.drive import drive_sse
from .._models.provider import ChunkParser
from ..providers.anthropic import AnthropicChunkParser
from ..providers.gemini import GeminiChunkParser
from ..providers.openai import OpenAiChatChunkParser, OpenAiResponsesChunkParser

__all__ = ["PROTOCOLS", "parser_for", "replay_sse"]

PROTOCOLS: dict[str, Callable[[], ChunkParser]] = {
    "anthropic": AnthropicChunkParser,
    "gemini": GeminiChunkParser,
    "openai-chat": OpenAiChatChunkParser,
    "openai-responses": OpenAiResponsesChunkParser,
}
"""The wire protocols rxllm parses, by name, with their parser factories."""


def parser_for(protocol: str) -> ChunkParser:
    """A fresh parser for a protocol named in :data:`PROTOCOLS`.

    Raises:
        ConfigurationError: for an unknown protocol (the message lists the known ones).
    """
    try:
        return PROTOCOLS[protocol]()
    except KeyError:
        known = ", ".join(sorted(PROTOCOLS))
        raise ConfigurationError(f"unknown protocol {protocol!r}; known: {known}") from None


def replay_sse(pieces: bytes | Iterable[bytes], parser: ChunkParser) -> list[LlmResponse]:
    """What ``generate_content(stream=True)`` would emit for a recorded body: partials, then the final.

    Args:
        pieces: the body, whole or as the reads a network delivered it in.
        parser: a fresh parser for the body's protocol (see :func:`parser_for`).

    Raises:
        StreamInterruptedError: the bytes end before the provider said the turn was complete.
        RxLlmError: whatever a live stream would fail with (malformed JSON, a malformed tool call...).

    >>> from rxllm.testing import assert_stream_protocol
    >>> body = (b'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}\\n\\n'
    ...         b'data: [DONE]\\n\\n')
    >>> assert_stream_protocol(replay_sse(body, parser_for("openai-chat"))).text()
    'Hi'
    """
    aggregator = StreamAggregator()
    out: list[LlmResponse] = []
    accept = aggregator.accept
    drive_sse([pieces] if isinstance(pieces, bytes) else pieces, parser, lambda chunk: out.extend(accept(chunk)))
    if not aggregator.is_complete:
        raise StreamInterruptedError("the recorded body ends before the provider said the turn was complete")
    out.append(aggregator.finish())
    return out
