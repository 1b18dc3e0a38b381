"""Gemini (the Generative Language API) on the rxllm stream contract.

>>> GeminiModel("gemini-2.5-flash", api_key="secret")
GeminiModel(model='gemini-2.5-flash')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Unpack

from .._sse_chat_model import SseChatModel
from ._gemini import GeminiChunkParser, GeminiRequestMapper
from ._options import SseModelOptions, resolve_api_key

__all__ = ["DEFAULT_BASE_URL", "GeminiChunkParser", "GeminiModel", "GeminiRequestMapper"]

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"


class GeminiModel(SseChatModel):
    """A Gemini model: POST ``{base_url}/v1beta/models/{model}:streamGenerateContent?alt=sse``
    (``:generateContent`` when not streaming). The key travels in the ``x-goog-api-key`` header,
    never in the URL.

    Args:
        model: the model name.
        base_url: the API root.
        api_key: the key; defaults to ``GEMINI_API_KEY``, then ``GOOGLE_API_KEY``; required for
            the default ``base_url``. Never shown in a repr, log or error.
        extra_headers: more headers for every request.
        **options: :class:`~rxllm.providers.SseModelOptions`.

    Raises:
        ConfigurationError: no key for the Google endpoint.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
        **options: Unpack[SseModelOptions],
    ) -> None:
        key = resolve_api_key(
            api_key,
            ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
            required=base_url.rstrip("/") == DEFAULT_BASE_URL,
            provider="gemini",
        )
        mapper = GeminiRequestMapper(base_url=base_url, api_key=key, extra_headers=extra_headers)
        super().__init__(model, mapper=mapper, parser=GeminiChunkParser, **options)
