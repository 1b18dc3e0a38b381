"""The transport over an HTTP client the user built (``http_client=`` on every model)."""

from __future__ import annotations

import asyncio

from .asynchronous import AsyncHttpTransport
from .base import check_client
from .stack import HTTPX2, stack_of
from .threaded import HttpTransport

__all__ = ["transport_for_client"]


def transport_for_client(client: object) -> HttpTransport | AsyncHttpTransport:
    """The transport over a client the user built: an ``httpx2.Client`` (or a legacy ``httpx.Client``)
    gets an :class:`HttpTransport`, an ``httpx2.AsyncClient`` (or ``httpx.AsyncClient``) an
    :class:`AsyncHttpTransport` on the running loop (if any; the client belongs to the loop it is
    used on), else on its own loop.

    Raises:
        ConfigurationError: ``client`` is neither, or is closed.
    """
    stack = stack_of(client) or HTTPX2
    sync_kind, async_kind = stack.client_kinds()
    check_client(client, (sync_kind, async_kind))
    if isinstance(client, async_kind):
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        return AsyncHttpTransport(http_client=client, loop=loop)
    return HttpTransport(http_client=client)
