"""OpenAI Chat Completions, and every OpenAI-compatible server (Ollama, vLLM, llama.cpp, Groq,
DeepSeek, OpenRouter, ...) through ``base_url``.

>>> model = OpenAiChatModel("llama3.2", base_url="http://127.0.0.1:11434/v1")  # Ollama: no key needed
>>> model
OpenAiChatModel(model='llama3.2')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Unpack

from .._sse_chat_model import SseChatModel
from ._openai_chat import OpenAiChatChunkParser, OpenAiChatRequestMapper
from ._openai_responses import OpenAiResponsesChunkParser, OpenAiResponsesRequestMapper
from ._options import SseModelOptions, resolve_api_key

__all__ = [
    "DEFAULT_BASE_URL",
    "OpenAiChatChunkParser",
    "OpenAiChatModel",
    "OpenAiChatRequestMapper",
    "OpenAiResponsesChunkParser",
    "OpenAiResponsesModel",
    "OpenAiResponsesRequestMapper",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAiChatModel(SseChatModel):
    """An OpenAI-compatible chat-completions model: POST ``{base_url}/chat/completions``.

    Args:
        model: the model name.
        base_url: the API root, e.g. ``http://127.0.0.1:11434/v1`` for Ollama.
        api_key: the key; defaults to ``OPENAI_API_KEY``. Required only for the default
            ``base_url`` (local servers usually need none). Never shown in a repr, log or error.
        extra_headers: more headers for every request (e.g. OpenRouter's ``HTTP-Referer``).
        **options: :class:`~rxllm.providers.SseModelOptions` (transport, scheduler, retry policy...).

    Raises:
        ConfigurationError: no key for api.openai.com.
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
            api_key, ("OPENAI_API_KEY",), required=base_url.rstrip("/") == DEFAULT_BASE_URL, provider="openai"
        )
        mapper = OpenAiChatRequestMapper(base_url=base_url, api_key=key, extra_headers=extra_headers)
        super().__init__(model, mapper=mapper, parser=OpenAiChatChunkParser, **options)


class OpenAiResponsesModel(SseChatModel):
    """An OpenAI Responses-API model: POST ``{base_url}/responses``.

    Args:
        model: the model name.
        base_url: the API root.
        api_key: the key; defaults to ``OPENAI_API_KEY``; required for the default ``base_url``.
            Never shown in a repr, log or error.
        extra_headers: more headers for every request.
        **options: :class:`~rxllm.providers.SseModelOptions`.

    Raises:
        ConfigurationError: no key for api.openai.com.
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
            api_key, ("OPENAI_API_KEY",), required=base_url.rstrip("/") == DEFAULT_BASE_URL, provider="openai"
        )
        mapper = OpenAiResponsesRequestMapper(base_url=base_url, api_key=key, extra_headers=extra_headers)
        super().__init__(model, mapper=mapper, parser=OpenAiResponsesChunkParser, **options)
