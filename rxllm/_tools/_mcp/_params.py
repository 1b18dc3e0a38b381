"""How an :class:`~rxllm.agents.McpToolset` reaches its server: ADK Java's connection parameters.

Plain frozen dataclasses: building one imports nothing of the ``mcp`` SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._core.errors import ConfigurationError
from ..._core.redact import is_secret_name, redact_headers, redact_url, secure_destination
from .._loops import check_timeout

__all__ = [
    "ConnectionParams",
    "SseServerParameters",
    "StdioServerParameters",
    "StreamableHttpServerParameters",
]

DEFAULT_CONNECT_TIMEOUT = 10.0
"""Seconds a connection (process start or HTTP connect, then the MCP handshake) may take."""

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The largest JSON-RPC message read from a stdio server (16 MiB); a larger one ends the session."""


@dataclass(frozen=True)
class StdioServerParameters:
    """A server run as a subprocess, spoken to over its stdin and stdout (MCP's stdio transport).

    Args:
        command: the executable (``"npx"``, ``sys.executable``...).
        args: its arguments.
        env: extra environment variables, merged over a safe default set (``HOME``, ``PATH``,
            ``LOGNAME``, ``SHELL``, ``TERM``, ``USER``) as the ``mcp`` SDK does; the rest of this
            process's environment (API keys included) is not passed on.
        cwd: its working directory.
        timeout: seconds starting the process and the MCP handshake may take.
        max_message_bytes: the largest message read from it; a larger one ends the session with
            a :class:`~rxllm.ToolError` (the model sees it, the process is stopped).
        stderr: where the server's stderr goes: None for this process's stderr, or a file object.
    """

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | Path | None = None
    timeout: float = DEFAULT_CONNECT_TIMEOUT
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    stderr: Any = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.command, str) or not self.command:
            raise ConfigurationError("StdioServerParameters needs a command")
        if isinstance(self.args, str):
            raise ConfigurationError("StdioServerParameters.args is a sequence of strings, not one string")
        object.__setattr__(self, "args", tuple(str(arg) for arg in self.args))
        check_timeout(self.timeout, "StdioServerParameters.timeout")
        if not isinstance(self.max_message_bytes, int) or self.max_message_bytes < 1024:
            raise ConfigurationError("StdioServerParameters.max_message_bytes must be an int of at least 1024")

    def __repr__(self) -> str:  # env values may be secrets: only their names are shown
        env = None if self.env is None else sorted(self.env)
        return f"StdioServerParameters(command={self.command!r}, args={self.args!r}, env={env!r}, cwd={self.cwd!r})"


@dataclass(frozen=True)
class _HttpParameters:
    url: str
    headers: Mapping[str, str] | None = None
    timeout: float = DEFAULT_CONNECT_TIMEOUT
    sse_read_timeout: float = 300.0
    httpx_client_factory: Callable[..., Any] | None = field(default=None, compare=False)
    secret_names: Sequence[str] = ()
    allow_insecure_key: bool = False

    def __post_init__(self) -> None:
        kind = type(self).__name__
        if not isinstance(self.url, str) or not self.url.startswith(("http://", "https://")):
            raise ConfigurationError(f"{kind} needs an http:// or https:// URL, got {self.url!r}")
        check_timeout(self.timeout, f"{kind}.timeout")
        check_timeout(self.sse_read_timeout, f"{kind}.sse_read_timeout")
        if isinstance(self.secret_names, str):
            raise ConfigurationError(f"{kind}.secret_names is a sequence of header names, not one string")
        object.__setattr__(self, "secret_names", tuple(self.secret_names))
        if self.httpx_client_factory is not None and not callable(self.httpx_client_factory):
            raise ConfigurationError(f"{kind}.httpx_client_factory must be callable")
        credentials = [n for n, v in (self.headers or {}).items() if v and is_secret_name(n, self.secret_names)]
        if credentials and not self.allow_insecure_key and not secure_destination(self.url):
            raise ConfigurationError(
                f"{kind}: refusing to send credentials ({', '.join(sorted(credentials))}) over plain http:// "
                f"to {redact_url(self.url)!r}, which is not loopback; use https:// or allow_insecure_key=True"
            )

    def __repr__(self) -> str:  # header values (a bearer token) never in a repr
        headers = None if self.headers is None else redact_headers(dict(self.headers), self.secret_names)
        url = redact_url(self.url, self.secret_names)
        return f"{type(self).__name__}(url={url!r}, headers={headers!r}, timeout={self.timeout!r})"


@dataclass(frozen=True, repr=False)
class StreamableHttpServerParameters(_HttpParameters):
    """A server at a streamable-HTTP endpoint (``http://127.0.0.1:8000/mcp``).

    Args:
        url: the endpoint.
        headers: sent with every request (``Authorization``...); never shown in a repr or log.
        timeout: seconds connecting and the MCP handshake may take, and the HTTP timeout of a
            request.
        sse_read_timeout: seconds a response stream may stay silent.
        httpx_client_factory: builds the ``httpx2.AsyncClient`` (the ``mcp`` SDK's
            ``McpHttpClientFactory``: called with ``headers``, ``timeout`` and ``auth``) for
            proxies, certificates, limits and event hooks, as a model's ``http_client`` does.
            Called once per session (a toolset that reconnects, or one session per invocation,
            calls it again); the session closes the client it made.
        secret_names: more header names whose values are credentials (names like
            ``authorization``, ``*key*``, ``*token*`` already are), as a model's
            ``secret_names``: never in a repr, cut out of error messages and server log lines.
        allow_insecure_key: send credential headers over plain ``http://`` to a host that is not
            loopback (refused by default, as for models).
        terminate_on_close: end the server's session with a DELETE when the toolset closes.
    """

    terminate_on_close: bool = True


@dataclass(frozen=True, repr=False)
class SseServerParameters(_HttpParameters):
    """A server on MCP's older HTTP+SSE transport (``http://127.0.0.1:8000/sse``).

    Args: as :class:`StreamableHttpServerParameters` (without ``terminate_on_close``).
    """


ConnectionParams = StdioServerParameters | StreamableHttpServerParameters | SseServerParameters
"""What ``McpToolset(connection_params)`` takes."""
