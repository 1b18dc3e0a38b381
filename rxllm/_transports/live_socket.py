"""Opening a live session's WebSocket through the user's ``httpx2.Client``, or one of its own.

The model classes (``GeminiModel.connect``, ``OpenAiRealtimeModel``) take ``http_client=`` as an
opaque object so that only this room imports httpx2: :func:`open_live_socket` checks it is an
``httpx2.Client`` and, when none is given, makes one for the one connection and closes it when
the connection is released.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping

import httpx2

from .._core.errors import ConfigurationError
from .._core.redact import Redactor, secure_destination
from .websocket import WebSocketConnection, WebSocketLimits, connect_websocket

__all__ = ["check_live_client", "check_live_destination", "open_live_socket"]


def check_live_client(http_client: object, provider: str) -> None:
    """Raise ``ConfigurationError`` unless ``http_client`` is ``None`` or an ``httpx2.Client``."""
    if http_client is not None and not isinstance(http_client, httpx2.Client):
        raise ConfigurationError(
            f"http_client must be an httpx2.Client for a live session, got {type(http_client).__name__}",
            provider=provider,
        )


def check_live_destination(url: str, headers: Mapping[str, str], provider: str) -> None:
    """Refuse to send a credential (in the URL query or a header) over plain ``ws://`` to a host
    that is not loopback.

    Raises:
        ConfigurationError: naming the URL with its secrets shown as ``***``.
    """
    redactor = Redactor.of_request(url, dict(headers))
    if redactor.has_secrets and not secure_destination(url):
        raise ConfigurationError(
            f"refusing to send a credential over plain ws:// to {redactor.url(url)!r}: use wss:// (or a loopback "
            "address)",
            provider=provider,
        )


def open_live_socket(
    http_client: object,
    url: str,
    *,
    headers: Mapping[str, str],
    limits: WebSocketLimits,
    provider: str,
    connect_timeout: float,
) -> tuple[WebSocketConnection, Callable[[], None]]:
    """The open WebSocket and what releases what this call made (a client of its own, or nothing).

    Raises:
        RxLlmError: as :func:`~rxllm._transports.websocket.connect_websocket`.
    """
    check_live_client(http_client, provider)
    owned: httpx2.Client | None = None
    client = http_client
    if client is None:
        owned = client = httpx2.Client(timeout=httpx2.Timeout(connect_timeout))
    assert isinstance(client, httpx2.Client)
    try:
        connection = connect_websocket(client, url, headers=headers, limits=limits, provider=provider)
    except BaseException:
        if owned is not None:
            owned.close()
        raise

    def release() -> None:
        if owned is not None:
            with contextlib.suppress(Exception):
                owned.close()

    return connection, release
