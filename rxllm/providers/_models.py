"""The ready-made provider models: each a request mapper + chunk parser pair on :class:`~rxllm.SseChatModel`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal, Unpack, cast
from urllib.parse import quote, urlsplit

from pydantic import JsonValue

from .._core.errors import ConfigurationError
from .._core.types import LlmRequest
from .._models.live_connection import LiveLimits, WebSocketLlmConnection
from .._models.sse_chat_model import SseChatModel
from ._anthropic import ANTHROPIC_BASE_URL, AnthropicChunkParser, AnthropicRequestMapper
from ._gemini import DEFAULT_GEMINI_BASE_URL as GEMINI_BASE_URL
from ._gemini import GeminiChunkParser, GeminiRequestMapper
from ._gemini_live import connect_gemini_live
from ._openai_chat import OpenAiChatChunkParser, OpenAiChatRequestMapper
from ._openai_responses import OPENAI_BASE_URL, OpenAiResponsesChunkParser, OpenAiResponsesRequestMapper
from ._options import SseModelOptions, resolve_api_key

__all__ = [
    "ANTHROPIC_BASE_URL",
    "GEMINI_BASE_URL",
    "OPENAI_BASE_URL",
    "AnthropicModel",
    "AzureOpenAiChatModel",
    "GeminiModel",
    "OpenAiChatModel",
    "OpenAiResponsesModel",
]


class OpenAiChatModel(SseChatModel):
    """An OpenAI-compatible chat-completions model: POST ``{base_url}/chat/completions``.

    Args:
        model: the model name.
        base_url: the API root, e.g. ``http://127.0.0.1:11434/v1`` for Ollama.
        api_key: the key. For the default ``base_url`` it defaults to ``OPENAI_API_KEY`` and is
            required; another server (Groq, OpenRouter, a local Ollama) gets only a key passed
            here, never the environment's OpenAI key. Never shown in a repr, log or error.
        extra_headers: more headers for every request (e.g. OpenRouter's ``HTTP-Referer``).
        extra_body: more JSON body members for every request (llama.cpp's ``ignore_eos``, vLLM's
            ``guided_json``, OpenRouter's ``provider``), merged into the body; a request's
            ``config.http_options.extra_body`` is merged over it. Where rxllm sets a member too,
            rxllm's value is sent (and a warning logged) unless ``extra_body_overrides=True``.
            Members named like credentials show as ``***`` in reprs.
        extra_body_overrides: whether ``extra_body`` values replace the ones rxllm sets.
        max_tokens_param: the body field ``max_output_tokens`` goes in: ``"max_tokens"`` (every
            compatible server) or ``"max_completion_tokens"`` (OpenAI's o-series and gpt-5).
        **options: :class:`~rxllm.providers.SseModelOptions` (transport, scheduler, retry policy...).

    Raises:
        ConfigurationError: no key for api.openai.com.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = OPENAI_BASE_URL,
        api_key: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, JsonValue] | None = None,
        extra_body_overrides: bool = False,
        max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
        **options: Unpack[SseModelOptions],
    ) -> None:
        key = resolve_api_key(
            api_key, ("OPENAI_API_KEY",), base_url=base_url, official_url=OPENAI_BASE_URL, provider="openai"
        )
        mapper = OpenAiChatRequestMapper(
            base_url=base_url,
            api_key=key,
            extra_headers=extra_headers,
            max_tokens_param=max_tokens_param,
            extra_body=extra_body,
            extra_body_overrides=extra_body_overrides,
        )
        super().__init__(model, mapper=mapper, parser=OpenAiChatChunkParser, **options)


_AZURE_HOST_SUFFIXES = (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com")


class AzureOpenAiChatModel(SseChatModel):
    """An Azure OpenAI chat deployment: POST
    ``{endpoint}/openai/deployments/{deployment}/chat/completions?api-version={api_version}``.

    Args:
        deployment: the deployment's name (Azure routes by it; it is also the default model name).
        endpoint: the resource's endpoint, e.g. ``https://my-resource.openai.azure.com``.
        api_version: the ``api-version`` query parameter, e.g. ``"2024-10-21"``.
        api_key: the resource key, sent as ``api-key``. Defaults to ``AZURE_OPENAI_API_KEY``,
            read only for an Azure OpenAI endpoint (``*.openai.azure.com``,
            ``*.cognitiveservices.azure.com``, ``*.services.ai.azure.com``) or the one in
            ``AZURE_OPENAI_ENDPOINT``: the key never goes to another server unless passed here.
        azure_ad_token: a Microsoft Entra ID token, sent as ``Authorization: Bearer``; give
            either it or a key, never both. Neither is ever shown in a repr, log or error.
        extra_headers: more headers for every request.
        extra_body: more JSON body members for every request (llama.cpp's ``ignore_eos``, vLLM's
            ``guided_json``, OpenRouter's ``provider``), merged into the body; a request's
            ``config.http_options.extra_body`` is merged over it. Where rxllm sets a member too,
            rxllm's value is sent (and a warning logged) unless ``extra_body_overrides=True``.
            Members named like credentials show as ``***`` in reprs.
        extra_body_overrides: whether ``extra_body`` values replace the ones rxllm sets.
        max_tokens_param: as for :class:`OpenAiChatModel` (o-series deployments want
            ``"max_completion_tokens"``).
        **options: :class:`~rxllm.providers.SseModelOptions`.

    Raises:
        ConfigurationError: both a key and a token, neither (and none in the environment), or an
            empty deployment, endpoint or API version.

    >>> model = AzureOpenAiChatModel("gpt-4o", endpoint="https://r.openai.azure.com", api_version="2024-10-21",
    ...                               api_key="secret")
    >>> model, model.deployment
    (AzureOpenAiChatModel(model='gpt-4o'), 'gpt-4o')
    """

    def __init__(
        self,
        deployment: str,
        *,
        endpoint: str,
        api_version: str,
        api_key: str | None = None,
        azure_ad_token: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, JsonValue] | None = None,
        extra_body_overrides: bool = False,
        max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
        **options: Unpack[SseModelOptions],
    ) -> None:
        for name, value in (("deployment", deployment), ("endpoint", endpoint), ("api_version", api_version)):
            if not isinstance(value, str) or not value.strip():
                raise ConfigurationError(f"{name} must be a non-empty string", provider="azure-openai")
        if api_key and azure_ad_token:
            raise ConfigurationError("give api_key or azure_ad_token, not both", provider="azure-openai")
        root = endpoint.strip().rstrip("/")
        headers: dict[str, str] = {}
        if azure_ad_token:
            headers["Authorization"] = f"Bearer {azure_ad_token}"
        else:
            key = resolve_api_key(
                api_key,
                ("AZURE_OPENAI_API_KEY",),
                base_url=root,
                official_url="",
                provider="azure-openai",
                official=_is_azure_endpoint(root),
            )
            if not key:
                raise ConfigurationError(
                    "no credential: pass api_key=... or azure_ad_token=..., or set AZURE_OPENAI_API_KEY "
                    "(read only for an Azure OpenAI endpoint or the one in AZURE_OPENAI_ENDPOINT)",
                    provider="azure-openai",
                )
            headers["api-key"] = key
        headers.update(extra_headers or {})
        base_url = (
            f"{root}/openai/deployments/{quote(deployment.strip(), safe='')}?api-version={quote(api_version.strip())}"
        )
        mapper = OpenAiChatRequestMapper(
            base_url=base_url,
            api_key=None,
            extra_headers=headers,
            max_tokens_param=max_tokens_param,
            extra_body=extra_body,
            extra_body_overrides=extra_body_overrides,
        )
        self._deployment = deployment.strip()
        super().__init__(self._deployment, mapper=mapper, parser=OpenAiChatChunkParser, **options)

    @property
    def deployment(self) -> str:
        """The deployment's name."""
        return self._deployment


def _is_azure_endpoint(endpoint: str) -> bool:
    """Whether ``AZURE_OPENAI_API_KEY`` may be sent to ``endpoint``."""
    configured = os.environ.get("AZURE_OPENAI_ENDPOINT", "").strip().rstrip("/")
    if configured and endpoint == configured:
        return True
    host = (urlsplit(endpoint).hostname or "").lower()
    return urlsplit(endpoint).scheme == "https" and host.endswith(_AZURE_HOST_SUFFIXES)


class OpenAiResponsesModel(SseChatModel):
    """An OpenAI Responses-API model: POST ``{base_url}/responses``.

    Args:
        model: the model name.
        base_url: the API root.
        api_key: the key. For the default ``base_url`` it defaults to ``OPENAI_API_KEY`` and is
            required; another server gets only a key passed here. Never shown in a repr, log or error.
        extra_headers: more headers for every request.
        extra_body: more JSON body members for every request (llama.cpp's ``ignore_eos``, vLLM's
            ``guided_json``, OpenRouter's ``provider``), merged into the body; a request's
            ``config.http_options.extra_body`` is merged over it. Where rxllm sets a member too,
            rxllm's value is sent (and a warning logged) unless ``extra_body_overrides=True``.
            Members named like credentials show as ``***`` in reprs.
        extra_body_overrides: whether ``extra_body`` values replace the ones rxllm sets.
        **options: :class:`~rxllm.providers.SseModelOptions`.

    Raises:
        ConfigurationError: no key for api.openai.com.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = OPENAI_BASE_URL,
        api_key: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, JsonValue] | None = None,
        extra_body_overrides: bool = False,
        **options: Unpack[SseModelOptions],
    ) -> None:
        key = resolve_api_key(
            api_key, ("OPENAI_API_KEY",), base_url=base_url, official_url=OPENAI_BASE_URL, provider="openai"
        )
        mapper = OpenAiResponsesRequestMapper(
            base_url=base_url,
            api_key=key,
            extra_headers=extra_headers,
            extra_body=extra_body,
            extra_body_overrides=extra_body_overrides,
        )
        super().__init__(model, mapper=mapper, parser=OpenAiResponsesChunkParser, **options)


class AnthropicModel(SseChatModel):
    """A Claude model: POST ``{base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version``.

    Args:
        model: the model name.
        base_url: the API root (without ``/v1``).
        api_key: the key. For the default ``base_url`` it defaults to ``ANTHROPIC_API_KEY`` and is
            required; another server (a gateway) gets only a key passed here. Never shown in a repr,
            log or error.
        max_tokens: ``max_tokens`` when the request's config sets no ``max_output_tokens``
            (Anthropic requires one).
        extra_headers: more headers for every request (e.g. ``anthropic-beta``).
        extra_body: more JSON body members for every request (llama.cpp's ``ignore_eos``, vLLM's
            ``guided_json``, OpenRouter's ``provider``), merged into the body; a request's
            ``config.http_options.extra_body`` is merged over it. Where rxllm sets a member too,
            rxllm's value is sent (and a warning logged) unless ``extra_body_overrides=True``.
            Members named like credentials show as ``***`` in reprs.
        extra_body_overrides: whether ``extra_body`` values replace the ones rxllm sets.
        **options: :class:`~rxllm.providers.SseModelOptions`.

    Raises:
        ConfigurationError: no key for api.anthropic.com.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = ANTHROPIC_BASE_URL,
        api_key: str | None = None,
        max_tokens: int = 4096,
        extra_headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, JsonValue] | None = None,
        extra_body_overrides: bool = False,
        **options: Unpack[SseModelOptions],
    ) -> None:
        key = resolve_api_key(
            api_key, ("ANTHROPIC_API_KEY",), base_url=base_url, official_url=ANTHROPIC_BASE_URL, provider="anthropic"
        )
        mapper = AnthropicRequestMapper(
            base_url=base_url,
            api_key=key,
            max_tokens=max_tokens,
            extra_headers=extra_headers,
            extra_body=extra_body,
            extra_body_overrides=extra_body_overrides,
        )
        super().__init__(model, mapper=mapper, parser=AnthropicChunkParser, **options)


class GeminiModel(SseChatModel):
    """A Gemini model: POST ``{base_url}/v1beta/models/{model}:streamGenerateContent?alt=sse``
    (``:generateContent`` when not streaming). The key travels in the ``x-goog-api-key`` header,
    never in the URL.

    Args:
        model: the model name.
        base_url: the API root.
        api_key: the key. For the default ``base_url`` it defaults to ``GEMINI_API_KEY``, then
            ``GOOGLE_API_KEY``, and is required; another server gets only a key passed here. Never
            shown in a repr, log or error.
        extra_headers: more headers for every request.
        extra_body: more JSON body members for every request (llama.cpp's ``ignore_eos``, vLLM's
            ``guided_json``, OpenRouter's ``provider``), merged into the body; a request's
            ``config.http_options.extra_body`` is merged over it. Where rxllm sets a member too,
            rxllm's value is sent (and a warning logged) unless ``extra_body_overrides=True``.
            Members named like credentials show as ``***`` in reprs.
        extra_body_overrides: whether ``extra_body`` values replace the ones rxllm sets.
        **options: :class:`~rxllm.providers.SseModelOptions`.

    Raises:
        ConfigurationError: no key for the Google endpoint.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = GEMINI_BASE_URL,
        api_key: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, JsonValue] | None = None,
        extra_body_overrides: bool = False,
        **options: Unpack[SseModelOptions],
    ) -> None:
        key = resolve_api_key(
            api_key,
            ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
            base_url=base_url,
            official_url=GEMINI_BASE_URL,
            provider="gemini",
        )
        mapper = GeminiRequestMapper(
            base_url=base_url,
            api_key=key,
            extra_headers=extra_headers,
            extra_body=extra_body,
            extra_body_overrides=extra_body_overrides,
        )
        super().__init__(model, mapper=mapper, parser=GeminiChunkParser, **options)

    def connect(
        self, llm_request: LlmRequest, *, http_client: object = None, limits: LiveLimits | None = None
    ) -> WebSocketLlmConnection:
        """Open a Gemini Live session (BidiGenerateContent over a WebSocket; ``docs/live.md``), as
        ADK Java's ``Gemini.connect``. Returns at once; the socket opens in the background and a
        failure to open reaches ``receive()`` and the sends.

        Args:
            llm_request: the model, system instruction, tools, generation config and
                ``live_connect_config`` (modalities, speech, transcription, resumption).
            http_client: an ``httpx2.Client`` to open the socket through (its proxy, TLS and
                headers apply); ``None`` makes one for this session.
            limits: the session's bounds (:class:`~rxllm.LiveLimits`).
        """
        mapper = cast(GeminiRequestMapper, self._mapper)
        return connect_gemini_live(
            llm_request,
            model=self.model,
            base_url=mapper._base_url,
            api_version=mapper._api_version,
            api_key=mapper._api_key,
            extra_headers=mapper._extra_headers,
            http_client=http_client,
            limits=limits,
            allow_insecure_key=self._allow_insecure_key,
        )
