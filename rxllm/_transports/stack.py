"""The HTTP stack rxllm runs on: httpx2 over httpcore2, and a legacy httpx client when the user passes one.

rxllm's own clients are ``httpx2`` ones. A user may pass an ``httpx2.Client`` / ``httpx2.AsyncClient``,
or a legacy ``httpx.Client`` / ``httpx.AsyncClient`` (httpx 0.28 over httpcore 1.0): the two have the
same API and the same pool / network-backend seam, so both transports drive either. httpx is
never imported by rxllm unless such a client was passed: a client is told apart by the module of
its class (and of its bases, for a subclass), and the legacy modules are then taken from
``sys.modules`` (httpx is loaded, since its client exists) with httpcore beside it.

:data:`ERRORS` holds the exception classes of every stack in use, as tuples an ``except`` clause
reads when an exception arrives, so one handler covers a response of either stack.
"""

from __future__ import annotations

import importlib
import os
import ssl
import sys
import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import httpcore2
import httpx2

from .._core.errors import RxLlmError

__all__ = ["ERRORS", "HTTPX2", "HttpStack", "core_of", "shared_ssl_context", "stack_of"]


@dataclass(frozen=True, slots=True)
class HttpStack:
    """One HTTP client library: its httpx-shaped module and the httpcore-shaped module below it."""

    name: str
    httpx: ModuleType
    httpcore: ModuleType

    def client_kinds(self) -> tuple[type[Any], type[Any]]:
        """Its ``Client`` and ``AsyncClient``."""
        return self.httpx.Client, self.httpx.AsyncClient


class _Errors:
    """The exception classes of every stack in use: httpx2's, and httpx's once a legacy client was
    passed or httpx is loaded in the process.

    The second case is a mocking library built on httpx that patches httpcore2: respx, as
    pytest-httpx2 sets it up, raises a route's ``side_effect`` (``httpx.ConnectError``...) from
    inside an httpx2 client's pool. Each read checks ``sys.modules`` (one dict lookup) until the
    legacy classes joined; httpx is never imported here, and an ``httpx2.alias_httpx()`` alias
    (``sys.modules["httpx"]`` is httpx2) adds nothing.
    """

    def __init__(self) -> None:
        self._timeout: tuple[type[Exception], ...] = ()
        self._http: tuple[type[Exception], ...] = ()
        self._stream: tuple[type[Exception], ...] = ()
        self._invalid_url: tuple[type[Exception], ...] = ()
        self._pool_timeout: tuple[type[Exception], ...] = ()
        self._connect_timeout: tuple[type[Exception], ...] = ()
        self._write_timeout: tuple[type[Exception], ...] = ()
        self._local_protocol: tuple[type[Exception], ...] = ()
        # What a body read may raise below httpx's mapping (a transport of the user's that lets
        # httpcore's errors or the socket's through).
        self._raw: tuple[type[Exception], ...] = (OSError,)
        # What closing a response, a body or a connection may raise once its socket was shut down or
        # the peer went away (httpx does not map httpcore's errors raised while closing a stream).
        self._close: tuple[type[Exception], ...] = (OSError, RxLlmError)
        self._with_legacy = False

    def add(self, stack: HttpStack) -> None:
        httpx, httpcore = stack.httpx, stack.httpcore
        self._timeout += (httpx.TimeoutException,)
        self._http += (httpx.HTTPError,)
        self._stream += (httpx.StreamError,)
        self._invalid_url += (httpx.InvalidURL,)
        self._pool_timeout += (httpx.PoolTimeout,)
        self._connect_timeout += (httpx.ConnectTimeout,)
        self._write_timeout += (httpx.WriteTimeout,)
        self._local_protocol += (httpx.LocalProtocolError,)
        self._raw += (httpcore.NetworkError, httpcore.ProtocolError, httpcore.TimeoutException)
        self._close += (httpx.HTTPError, httpx.StreamError, httpcore.NetworkError, httpcore.ProtocolError,
                        httpcore.TimeoutException)
        if stack is not HTTPX2:
            self._with_legacy = True

    def _complete(self) -> None:
        """Add the legacy stack's classes if httpx (the real one, not an alias) is loaded."""
        if not self._with_legacy:
            loaded = sys.modules.get("httpx")
            if loaded is not None and getattr(loaded, "__name__", None) == "httpx":
                _legacy_stack()

    @property
    def timeout(self) -> tuple[type[Exception], ...]:
        self._complete()
        return self._timeout

    @property
    def http(self) -> tuple[type[Exception], ...]:
        self._complete()
        return self._http

    @property
    def stream(self) -> tuple[type[Exception], ...]:
        self._complete()
        return self._stream

    @property
    def invalid_url(self) -> tuple[type[Exception], ...]:
        self._complete()
        return self._invalid_url

    @property
    def pool_timeout(self) -> tuple[type[Exception], ...]:
        self._complete()
        return self._pool_timeout

    @property
    def connect_timeout(self) -> tuple[type[Exception], ...]:
        self._complete()
        return self._connect_timeout

    @property
    def write_timeout(self) -> tuple[type[Exception], ...]:
        self._complete()
        return self._write_timeout

    @property
    def local_protocol(self) -> tuple[type[Exception], ...]:
        self._complete()
        return self._local_protocol

    @property
    def raw(self) -> tuple[type[Exception], ...]:
        self._complete()
        return self._raw

    @property
    def close(self) -> tuple[type[Exception], ...]:
        self._complete()
        return self._close


ERRORS = _Errors()
HTTPX2 = HttpStack("httpx2", httpx2, httpcore2)
ERRORS.add(HTTPX2)
_legacy: HttpStack | None = None
_legacy_lock = threading.Lock()


def _legacy_stack() -> HttpStack:
    global _legacy
    with _legacy_lock:
        if _legacy is None:
            _legacy = HttpStack("httpx", sys.modules["httpx"], importlib.import_module("httpcore"))
            ERRORS.add(_legacy)
        return _legacy


def stack_of(obj: object) -> HttpStack | None:
    """The stack an object (a client, a transport) belongs to, by the module of its class or of a
    base; ``None`` for anything else (httpx is not imported to find out)."""
    for kind in type(obj).__mro__:
        root = kind.__module__.partition(".")[0]
        if root == "httpx2":
            return HTTPX2
        if root == "httpx" and "httpx" in sys.modules:
            return _legacy_stack()
    return None


def core_of(stream: object) -> ModuleType:
    """The httpcore-shaped module of a pool's network stream (its timeouts are raised to that pool)."""
    for kind in type(stream).__mro__:
        if kind.__module__.partition(".")[0] == "httpcore" and "httpcore" in sys.modules:
            return _legacy_stack().httpcore
    return httpcore2


_contexts: dict[tuple[bool, str | None, str | None], ssl.SSLContext] = {}
_contexts_lock = threading.Lock()


def shared_ssl_context(trust_env: bool) -> ssl.SSLContext:
    """The SSL context of rxllm's own clients, built once per process (per ``SSL_CERT_FILE`` /
    ``SSL_CERT_DIR`` when ``trust_env``) exactly as httpx2 builds its default one.

    Loading the trust store is most of what building a client costs (~18 ms); a client given an
    ``SSLContext`` uses it as it is, so every transport after the process's first builds its clients
    at once. The pools only set the ALPN protocols on it, the same for every HTTP/1.1 connection.
    """
    key = (trust_env, os.environ.get("SSL_CERT_FILE") if trust_env else None,
           os.environ.get("SSL_CERT_DIR") if trust_env else None)
    with _contexts_lock:
        context = _contexts.get(key)
        if context is None:
            context = _contexts[key] = httpx2.create_ssl_context(trust_env=trust_env)
        return context
