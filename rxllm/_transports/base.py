"""The transport seam: what a model asks of a transport, and what both transports share.

Only the modules of this room import the HTTP client library.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .._core.redact import redact_headers, redact_url

__all__ = ["HttpRequest"]


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """One HTTP request as a mapper builds it. Its repr never shows credential headers.

    Attributes:
        url: the full URL (never carries an API key: keys go in headers).
        body: the JSON body, already encoded.
        headers: request headers, credentials included.
        method: the HTTP method.
    """

    url: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    method: str = "POST"

    def __repr__(self) -> str:
        return (
            f"HttpRequest(method={self.method!r}, url={redact_url(self.url)!r}, "
            f"headers={redact_headers(self.headers)!r}, body=<{len(self.body)} bytes>)"
        )
