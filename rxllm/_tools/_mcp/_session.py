"""One MCP client session, owned by a task on rxllm's tool loop (imported only when a toolset connects).

The ``mcp`` SDK runs on anyio, whose task groups and cancel scopes must be entered and left by one
task. So a session is one long-lived task on :func:`~rxllm._tools.tool_loop` (rxllm's own asyncio
loop, a daemon thread): it enters ``mcp.Client`` and waits until the session is closed. Listing
and calls are other tasks on that loop using the client; cancelling one (a disposed run, a tool
timeout) makes the SDK send ``notifications/cancelled`` for the request before it gives up.

* **Bounded start**: the process start or HTTP connect plus the MCP handshake must finish within
  the connection's ``timeout``, else the session task is cancelled (a stdio process stopped) and
  the caller gets a :class:`~rxllm.ToolError`.
* **A dropped session** (the server exited, the connection ended, the server broke the protocol)
  fails the calls waiting on it with the reason; the next call opens a new session once
  (reconnect), and fails if that does not work either.
* **Server-to-client requests** are answered by :class:`~._requests.ClientRequests`: sampling
  through the using agent's model, elicitation and roots refused with an MCP error; the
  server's log messages (``info`` and above) go to the ``rxllm.mcp`` logger, secrets cut out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types
from mcp import Client
from mcp.shared.exceptions import MCPError

from ..._core.errors import ToolError
from ..._core.version import __version__
from ._params import ConnectionParams, SseServerParameters, StdioServerParameters, StreamableHttpServerParameters
from ._requests import ClientRequests, redactor_of
from ._stdio import stdio_transport

__all__ = ["McpSession", "close_all_sessions"]

_log = logging.getLogger("rxllm.mcp")

_LIST_PAGE_CAP = 100
"""Pages of ``tools/list`` read at most: a server whose cursor never ends cannot hang a listing."""

_open: weakref.WeakSet[McpSession] = weakref.WeakSet()



def close_all_sessions() -> None:
    """Close every open session (the process exit hook; see ``rxllm._tools._mcp._toolset``)."""
    for session in list(_open):
        session.close()


def _first_error(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _describe(error: BaseException) -> str:
    error = _first_error(error)
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class _WatchedStream:
    """The transport's read stream, reporting its end (EOF or close) to the session."""

    def __init__(self, inner: Any, ended: Any) -> None:
        self._inner = inner
        self._ended = ended

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def __aenter__(self) -> _WatchedStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        self._ended(None)
        return await self._inner.__aexit__(*exc)

    def __aiter__(self) -> _WatchedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._ended(None)
            raise StopAsyncIteration from None

    async def receive(self) -> Any:
        return await self._inner.receive()


class _Live:
    """One connection: the client, the task that owns it, and how it ended."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.task: asyncio.Task[None] | None = None
        self.stop = asyncio.Event()
        self.ended = False
        self.reason: str | None = None
        self.pid: int | None = None
        self.tools: list[mcp_types.Tool] | None = None

    def end(self, reason: str | None) -> None:
        """Mark the connection ended (on the loop's thread): the owner task then leaves the client."""
        if reason is not None and self.reason is None:
            self.reason = reason
        self.ended = True
        self.stop.set()


class McpSession:
    """A lazily opened, reconnecting MCP session (see the module docstring). Use it on the tool loop."""

    def __init__(
        self,
        params: ConnectionParams,
        loop: asyncio.AbstractEventLoop,
        label: str,
    ) -> None:
        self._params = params
        self._loop = loop
        self._label = label
        self.agent: Any = None
        """The agent using the session (set by the toolset at each listing): sampling asks its ``model``."""
        self._redactor = redactor_of(params)
        self._requests = ClientRequests(label, self._redactor, self._model)
        self._live: _Live | None = None
        self._opening: asyncio.Future[_Live] | None = None
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` ran: the session opens no connection any more."""
        return self._closed

    def _model(self) -> Any:
        agent = self.agent
        return None if agent is None else getattr(agent, "model", None)

    def __repr__(self) -> str:
        return f"McpSession({self._label})"

    @property
    def server_pid(self) -> int | None:
        """The process id of the current stdio server, if one runs."""
        live = self._live
        return None if live is None or live.ended else live.pid

    # -- opening ---------------------------------------------------------------------------

    def _transport(self, live: _Live) -> Any:
        params = self._params
        if isinstance(params, StdioServerParameters):
            inner = stdio_transport(params, lambda pid: setattr(live, "pid", pid), live.end)
        elif isinstance(params, StreamableHttpServerParameters):
            inner = _http_transport(params)
        else:
            inner = _sse_transport(params)

        @contextlib.asynccontextmanager
        async def watched() -> AsyncIterator[tuple[Any, Any]]:
            async with inner as (read, write):
                yield _WatchedStream(read, live.end), write

        return watched()

    async def _own(self, live: _Live, started: asyncio.Future[None]) -> None:
        """The session task: enter the client, wait for close, leave it (all in this one task)."""
        requests = self._requests
        try:
            client = Client(
                self._transport(live),
                mode="auto",
                cache=None,
                logging_callback=requests.on_log,
                sampling_callback=requests.on_sampling,
                elicitation_callback=requests.on_elicitation,
                list_roots_callback=requests.on_list_roots,
                log_level="info",  # the opt-in 2026-era servers need before they send log messages
                client_info=mcp_types.Implementation(name="rxllm", version=__version__),
            )
            async with client:
                live.client = client
                if not started.done():
                    started.set_result(None)
                await live.stop.wait()
        except BaseException as exc:  # the owner task reports every end, cancellation included
            live.end(live.reason or self._redactor.redact(_describe(exc)))
            if not started.done():
                started.set_exception(ToolError(f"{self._label}: cannot connect to the MCP server: {live.reason}"))
            if not isinstance(exc, Exception | asyncio.CancelledError):
                raise
        finally:
            live.end(None)

    async def _open(self) -> _Live:
        if self._closed:
            raise ToolError(f"{self._label} is closed")
        live = _Live()
        started: asyncio.Future[None] = self._loop.create_future()
        live.task = self._loop.create_task(self._own(live, started))
        _open.add(self)
        try:
            await asyncio.wait_for(asyncio.shield(started), self._params.timeout)
        except TimeoutError:
            live.task.cancel()
            with contextlib.suppress(BaseException):
                await live.task
            if started.done() and not started.cancelled():
                started.exception()  # retrieved: the timeout is the error reported
            raise ToolError(
                f"{self._label}: the MCP server did not complete the handshake within {self._params.timeout:g} s"
            ) from None
        except asyncio.CancelledError:
            live.task.cancel()
            raise
        return live

    async def _connection(self) -> _Live:
        """The live connection, opened on first use and opened again (once) when it dropped."""
        live = self._live
        if live is not None and not live.ended:
            return live
        if live is not None:
            _log.info("%s: the MCP session ended (%s); reconnecting", self._label, live.reason or "closed")
            await self._finish(live)
        if self._opening is None:
            self._opening = self._loop.create_future()
            opening = self._opening
            try:
                self._live = await self._open()
                opening.set_result(self._live)
            except BaseException as exc:
                opening.set_exception(exc if isinstance(exc, Exception) else ToolError(repr(exc)))
                opening.exception()  # retrieved: other waiters re-raise it
                raise
            finally:
                self._opening = None
            return self._live
        return await asyncio.shield(self._opening)

    # -- use -------------------------------------------------------------------------------

    async def _failure(self, live: _Live, what: str, error: BaseException) -> ToolError:
        """The error for a failed request; a session that ended is wound down first (a stdio server reaped)."""
        failure = self._failed(live, what, error)
        if live.ended:
            await self._finish(live)
        return failure

    def _failed(self, live: _Live, what: str, error: BaseException) -> ToolError:
        failure = self._failed_unredacted(live, what, error)
        text = self._redactor.redact(str(failure))
        return failure if text == str(failure) else ToolError(text)

    def _failed_unredacted(self, live: _Live, what: str, error: BaseException) -> ToolError:
        error = _first_error(error)
        if isinstance(error, ToolError):
            return error
        if isinstance(error, MCPError) and error.code == mcp_types.CONNECTION_CLOSED:
            live.end(None)
            reason = live.reason or "the server closed the connection"
            return ToolError(f"{self._label}: {what} failed: the MCP session ended ({reason})")
        if isinstance(error, MCPError):
            return ToolError(f"{self._label}: {what} failed: MCP error {error.code}: {error.error.message}")
        if live.ended:
            return ToolError(f"{self._label}: {what} failed: the MCP session ended ({live.reason or _describe(error)})")
        return ToolError(f"{self._label}: {what} failed: {_describe(error)}")

    async def list_tools(self) -> list[mcp_types.Tool]:
        """Every tool of the server (all pages), cached for the session."""
        live = await self._connection()
        if live.tools is not None:
            return live.tools
        assert live.client is not None
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        try:
            async with asyncio.timeout(self._params.timeout):
                for _ in range(_LIST_PAGE_CAP):
                    page = await live.client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
        except TimeoutError:
            raise ToolError(
                f"{self._label}: the MCP server did not list its tools within {self._params.timeout:g} s"
            ) from None
        except Exception as exc:
            raise await self._failure(live, "listing the tools", exc) from exc
        live.tools = tools
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """Call ``name``; cancelling the awaiting task sends ``notifications/cancelled``."""
        live = await self._connection()
        assert live.client is not None
        try:
            return await live.client.call_tool(name, arguments)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise await self._failure(live, f"calling tool {name!r}", exc) from exc

    # -- closing ---------------------------------------------------------------------------

    async def _finish(self, live: _Live) -> None:
        live.stop.set()
        task = live.task
        if task is not None and not task.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(task), 10)
            if not task.done():
                task.cancel()
        if self._live is live:
            self._live = None

    async def aclose(self) -> None:
        """End the session (a stdio server is stopped and reaped); later calls fail."""
        self._closed = True
        _open.discard(self)
        live = self._live
        if live is not None:
            await self._finish(live)

    def close(self) -> None:
        """:meth:`aclose` from any thread: waits for it, except on the tool loop's own thread."""
        if self._closed and self._live is None:
            return
        if self._loop.is_closed():
            return
        future = asyncio.run_coroutine_threadsafe(self.aclose(), self._loop)
        try:
            on_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            on_loop = False
        if not on_loop:
            with contextlib.suppress(Exception):
                future.result(timeout=15)


def _http_transport(params: StreamableHttpServerParameters) -> Any:
    from mcp.client.streamable_http import streamable_http_client

    from ..._transports.mcp_http import mcp_http_client

    client = mcp_http_client(params.httpx_client_factory, params.headers or {}, params.timeout, params.sse_read_timeout)

    @contextlib.asynccontextmanager
    async def transport() -> AsyncIterator[Any]:
        async with client, streamable_http_client(
            params.url, http_client=client, terminate_on_close=params.terminate_on_close
        ) as streams:
            yield streams

    return transport()


def _sse_transport(params: SseServerParameters) -> Any:
    from mcp.client.sse import sse_client

    from ..._transports.mcp_http import mcp_http_client_factory

    return sse_client(
        params.url,
        headers=dict(params.headers or {}),
        timeout=params.timeout,
        sse_read_timeout=params.sse_read_timeout,
        httpx_client_factory=mcp_http_client_factory(params.httpx_client_factory),
    )
