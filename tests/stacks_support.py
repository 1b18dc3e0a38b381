"""A transport of either kind over either HTTP stack, for the tests that run a tool on both.

``"httpx2"`` is rxllm's own clients; ``"httpx"`` is a legacy ``httpx.Client`` / ``httpx.AsyncClient``
the test builds and passes as ``http_client=`` (and closes afterwards: rxllm never closes a client
it was given).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from rxllm import AsyncHttpTransport, HttpTransport

KINDS = ("threads", "asyncio")
STACKS = ("httpx2", "httpx")
_WAIT = 10.0


@contextlib.contextmanager
def transport_on(kind: str, stack: str = "httpx2") -> Iterator[HttpTransport | AsyncHttpTransport]:
    """A fresh transport of ``kind`` (``"threads"`` / ``"asyncio"``) over ``stack``, closed after."""
    if stack == "httpx2":
        made: HttpTransport | AsyncHttpTransport = HttpTransport() if kind == "threads" else AsyncHttpTransport()
        try:
            yield made
        finally:
            made.close()
        return
    assert stack == "httpx", stack
    import httpx

    if kind == "threads":
        client = httpx.Client()
        made = HttpTransport(http_client=client)
        try:
            yield made
        finally:
            made.close()
            client.close()
        return
    async_client = httpx.AsyncClient()
    made = AsyncHttpTransport(http_client=async_client)
    try:
        yield made
    finally:  # an async client is closed on the loop it ran on
        asyncio.run_coroutine_threadsafe(async_client.aclose(), made.loop).result(_WAIT)
        made.close()
