"""Anthropic Messages (``/v1/messages``) on the rxllm stream contract.

>>> AnthropicModel("claude-sonnet-4-5", api_key="sk-ant-secret")
AnthropicModel(model='claude-sonnet-4-5')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Unpack

from .._sse_chat_model import SseChatModel
from ._anthropic import AnthropicChunkParser, AnthropicRequestMapper
from ._options import SseModelOptions, resolve_api_key

__all__ = ["DEFAULT_BASE_URL", "AnthropicChunkParser", "AnthropicModel", "AnthropicRequestMapper"]

DEFAULT_BASE_URL = "https://api.anthropic.com"


class AnthropicModel(SseChatModel):
    """A Claude model: POST ``{base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version``.

    Args:
        model: the model name.
        base_url: the API root (without ``/v1``).
        api_key: the key; defaults to ``ANTHROPIC_API_KEY``; required for the default ``base_url``.
            Never shown in a repr, log or error.
        max_tokens: ``max_tokens`` when the request's config sets no ``max_output_tokens``
            (Anthropic requires one).
        extra_headers: more headers for every request (e.g. ``anthropic-beta``).
        **options: :class:`~rxllm.providers.SseModelOptions`.

    Raises:
        ConfigurationError: no key for api.anthropic.com.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        max_tokens: int = 4096,
        extra_headers: Mapping[str, str] | None = None,
        **options: Unpack[SseModelOptions],
    ) -> None:
        key = resolve_api_key(
            api_key, ("ANTHROPIC_API_KEY",), required=base_url.rstrip("/") == DEFAULT_BASE_URL, provider="anthropic"
        )
        mapper = AnthropicRequestMapper(
            base_url=base_url, api_key=key, max_tokens=max_tokens, extra_headers=extra_headers
        )
        super().__init__(model, mapper=mapper, parser=AnthropicChunkParser, **options)
