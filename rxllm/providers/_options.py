"""What every ready-made provider model shares: its transport options and API-key lookup."""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from typing import Any, TypedDict

from reactivex import abc as rx_abc

from .._core.errors import ConfigurationError
from .._core.redact import register_secret
from .._models.retry import RetryPolicy
from .._transports.base import Transport

__all__ = ["SseModelOptions", "checked_credential", "resolve_api_key"]


class SseModelOptions(TypedDict, total=False):
    """Keyword options every provider model passes to :class:`~rxllm.SseChatModel`.

    Keys: ``transport`` (:class:`~rxllm.HttpTransport`, :class:`~rxllm.AsyncHttpTransport` or any
    :class:`~rxllm.Transport`), ``http_client`` (an ``httpx2.Client`` or
    ``httpx2.AsyncClient``, or a legacy ``httpx`` one, you built, instead of ``transport``; never closed by rxllm),
    ``scheduler`` (where blocking I/O runs),
    ``retry_policy`` (:class:`~rxllm.RetryPolicy`), ``timer_scheduler`` (retry timers),
    ``max_line_bytes`` (the SSE line cap), ``secret_names`` (more credential header/query names to
    redact), ``allow_insecure_key`` (send a key over plain HTTP to a remote host).
    """

    transport: Transport
    http_client: Any
    scheduler: rx_abc.SchedulerBase
    retry_policy: RetryPolicy
    timer_scheduler: rx_abc.SchedulerBase
    max_line_bytes: int
    secret_names: Collection[str]
    allow_insecure_key: bool


def resolve_api_key(
    api_key: str | None,
    env_vars: Sequence[str],
    *,
    base_url: str,
    official_url: str,
    provider: str,
    official: bool | None = None,
) -> str | None:
    """``api_key``; else, when ``base_url`` is the provider's ``official_url``, its environment variable.

    A provider's key is never read from the environment for another ``base_url``: pointing an
    OpenAI model at Groq or a local server must not send the user's OpenAI key there. Pass
    ``api_key=`` explicitly for such servers. ``official``, when given, says whether ``base_url``
    is the key's own endpoint instead of comparing it with ``official_url`` (Azure: any Azure
    OpenAI resource, or the ``AZURE_OPENAI_ENDPOINT`` the key is configured with).

    Raises:
        ConfigurationError: for the official endpoint when no key was found (the message names
            the variables, never a value).
    """
    if api_key:
        return checked_credential(api_key, "api_key", provider)
    if official is None:
        official = base_url.rstrip("/") == official_url.rstrip("/")
    if not official:
        return None
    for name in env_vars:
        value = os.environ.get(name)
        if value and value.strip():
            return checked_credential(value, name, provider)
    if official:
        names = " or ".join(env_vars)
        raise ConfigurationError(f"no API key: pass api_key=... or set {names}", provider=provider)
    return None


def checked_credential(value: str, what: str, provider: str) -> str:
    """``value`` (a key or token) as it will be sent: surrounding whitespace and line ends
    stripped (a key read from a file keeps its newline), and known to redaction from now on.

    Raises:
        ConfigurationError: the key holds a character no HTTP header value can carry (a control
            character, or a non-ASCII one such as a typographic quote pasted from a web page).
            The message says which kind and where, never the key.
    """
    if not isinstance(value, str):
        raise ConfigurationError(f"{what} must be a string, got {type(value).__name__}", provider=provider)
    stripped = value.strip()
    if not stripped:
        raise ConfigurationError(f"{what} is empty (or only whitespace)", provider=provider)
    for position, char in enumerate(stripped, start=1):
        if not " " <= char <= "~":
            kind = "a non-ASCII character" if ord(char) > 0x7F else "a control character"
            raise ConfigurationError(
                f"{what} holds {kind} at position {position} of {len(stripped)}, which no HTTP header can "
                "carry: copy the key again (a quote or space pasted from a web page?)",
                provider=provider,
            )
    register_secret(stripped)
    return stripped
