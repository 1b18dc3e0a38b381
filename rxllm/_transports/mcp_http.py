"""The ``httpx2`` client an MCP toolset's HTTP transports use (imported only when one connects).

The ``mcp`` SDK's streamable-HTTP and SSE transports run on ``httpx2``; like every HTTP client
library, it is imported only in this room. Not re-exported by ``rxllm._transports``: importing
it imports the ``mcp`` SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import httpx2
from mcp.shared._httpx_utils import create_mcp_http_client

__all__ = ["mcp_http_client", "mcp_http_client_factory"]


def mcp_http_client_factory(factory: Callable[..., Any] | None) -> Callable[..., httpx2.AsyncClient]:
    """``factory`` (an ``McpHttpClientFactory``: called with ``headers``, ``timeout``, ``auth``), else the SDK's."""
    return factory or create_mcp_http_client


def mcp_http_client(
    factory: Callable[..., Any] | None, headers: Mapping[str, str], timeout: float, read_timeout: float
) -> httpx2.AsyncClient:
    """A client from ``factory`` with ``timeout`` for connect/write/pool and ``read_timeout`` for reads."""
    client: httpx2.AsyncClient = mcp_http_client_factory(factory)(
        headers=dict(headers), timeout=httpx2.Timeout(timeout, read=read_timeout)
    )
    return client
