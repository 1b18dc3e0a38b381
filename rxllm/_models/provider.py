"""What a provider plugs into :class:`~rxllm.SseChatModel`: a request mapper and a chunk parser.

Both are public protocols: write your own pair to stream from any SSE provider.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .._core.redact import redact_headers
from .._core.types import LlmRequest
from .._transports.base import HttpRequest
from .chunk import Chunk
from .sse import SseEvent

__all__ = ["ChunkParser", "HttpRequest", "RequestMapper", "redact_headers"]

class RequestMapper(Protocol):
    """Maps an :class:`~rxllm.LlmRequest` to the provider's HTTP request."""

    @property
    def provider(self) -> str:
        """The provider's short name, used in errors and logs (``"openai"``)."""
        ...

    def to_http_request(self, llm_request: LlmRequest, *, model: str, stream: bool) -> HttpRequest:
        """Build the request for ``model`` (the request's own model when set, else the model's).

        Raises:
            ConfigurationError: for a request the provider cannot express.
        """
        ...


class ChunkParser(Protocol):
    """Turns one provider SSE event into one normalized :class:`~rxllm.Chunk`.

    A parser translates and never accumulates; it may keep the little per-stream state its
    protocol needs (Anthropic's block types, Gemini's call count). A fresh parser is made for
    every subscription, so state never leaks across retries.
    """

    def parse(self, event: SseEvent) -> Chunk | None:
        """The chunk for ``event``, or ``None`` for events that carry nothing (``ping``).

        Raises:
            ProtocolError: for data the protocol does not allow (bad JSON, wrong shape).
        """
        ...

    def parse_response(self, body: bytes) -> Sequence[Chunk]:
        """The chunks of a complete, non-streamed response body (``stream=False``)."""
        ...
