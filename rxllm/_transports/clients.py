"""The transport over an HTTP client the user built (``http_client=`` on every model)."""

from __future__ import annotations

import asyncio
from typing import cast

import httpx

from .asynchronous import AsyncHttpTransport
from .base import check_client
from .threaded import HttpTransport

__all__ = ["transport_for_client"]


def transport_for_client(client: object) -> HttpTransport | AsyncHttpTransport:
    """The transport over a client the user built: an ``httpx.Client`` gets an :class:`HttpTransport`,
    an ``httpx.AsyncClient`` an :class:`AsyncHttpTransport` on the running loop (if any; the client
    belongs to the loop it is used on), else on its own loop.

    Raises:
        ConfigurationError: ``client`` is neither, or is closed.
    """
    check_client(client, (httpx.Client, httpx.AsyncClient))
    if isinstance(client, httpx.AsyncClient):
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        return AsyncHttpTransport(http_client=client, loop=loop)
    return HttpTransport(http_client=cast(httpx.Client, client))

