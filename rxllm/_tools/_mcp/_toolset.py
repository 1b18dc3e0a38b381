"""``McpToolset``: the tools of a Model Context Protocol server, as ADK Java's ``McpToolset``.

Nothing of the ``mcp`` SDK is imported until the toolset first connects (the ``mcp`` extra:
``pip install 'rxllm[mcp]'``). The toolset holds one MCP session (ADK's one session per toolset),
opened on first use: listing the tools (``get_tools()``, or the agent before its first model call)
or calling one. Its tools are listed once per session and cached; a session that dropped is
opened again once on the next use (see ``rxllm._tools._mcp._session``). ``close()`` ends the
session and stops a stdio server; sessions still open when the process exits are closed by an
exit hook, and any stdio server process left is killed, so none is orphaned.
"""

from __future__ import annotations

import atexit
import logging
import threading
from typing import TYPE_CHECKING, Any

import reactivex

from ..._core.errors import ConfigurationError, ToolError
from ..._core.types import FunctionDeclaration
from ..._rx.aio import AwaitableObservable, awaitable
from ..._rx.direct import defer_now
from .._context import ToolContext
from .._loops import check_timeout, coroutine_observable, tool_loop
from .._tool import BaseTool, ToolResult
from .._toolset import BaseToolset, ToolFilter
from ._params import ConnectionParams, SseServerParameters, StdioServerParameters, StreamableHttpServerParameters
from ._results import function_response_of
from ._schema import parameters_of

if TYPE_CHECKING:
    from ._session import McpSession

__all__ = ["McpTool", "McpToolset"]

_log = logging.getLogger("rxllm.mcp")
_hook_lock = threading.Lock()
_hooked = False


def _at_exit() -> None:
    from ._session import close_all_sessions
    from ._stdio import kill_live_servers

    close_all_sessions()
    kill_live_servers()


def _install_exit_hook() -> None:
    global _hooked
    with _hook_lock:
        if not _hooked:
            atexit.register(_at_exit)
            _hooked = True


class McpTool(BaseTool):
    """One tool of an MCP server (ADK's ``McpTool``): its declaration is the server's, its call a ``tools/call``.

    Made by :class:`McpToolset`; the result maps as ``rxllm._tools._mcp._results`` describes.
    """

    def __init__(
        self, toolset: McpToolset, name: str, description: str, parameters: dict[str, Any], timeout: float | None
    ) -> None:
        super().__init__(name=name, description=description, timeout=timeout)
        self._toolset = toolset
        self._parameters = parameters

    @property
    def toolset(self) -> McpToolset:
        """The toolset the tool came from."""
        return self._toolset

    def declaration(self) -> FunctionDeclaration:
        """The server's name, description and (mapped) input schema."""
        return FunctionDeclaration(name=self.name, description=self.description or None, parameters=self._parameters)

    def run(self, args: dict[str, Any], tool_context: ToolContext) -> reactivex.Observable[ToolResult]:
        """Call the tool on the server (on rxllm's tool loop); disposing cancels the call on the server too."""

        async def call() -> ToolResult:
            result = await self._toolset._session_now().call_tool(self.name, dict(args))
            return function_response_of(self.name, result.model_dump(mode="json", by_alias=True, exclude_none=True))

        return defer_now(lambda: coroutine_observable(call(), tool_loop()))


class McpToolset(BaseToolset):
    """The tools of an MCP server, for ``LlmAgent(tools=[...])`` (ADK Java's ``McpToolset``).

    Args:
        connection_params: how to reach the server: :class:`StdioServerParameters`,
            :class:`StreamableHttpServerParameters` or :class:`SseServerParameters`.
        tool_filter: the names of the tools to keep, or a predicate on each :class:`McpTool`.
        timeout: seconds one tool call may take (the tools' ``timeout``, see ``BaseTool``);
            None uses the runtime's default. A call past it is cancelled on the server.

    A tool whose input schema a model cannot take, or whose name is not usable, is left out with
    a warning (logger ``rxllm.mcp``); the others stay (see ``rxllm._tools._mcp._schema``).

    >>> import sys
    >>> from rxllm.agents import McpToolset, StdioServerParameters
    >>> toolset = McpToolset(StdioServerParameters(sys.executable, ["-m", "my_server"]), tool_filter=["read_file"])
    >>> toolset.tool_filter
    ('read_file',)
    >>> toolset.close()  # nothing was started: nothing to stop
    """

    def __init__(
        self,
        connection_params: ConnectionParams,
        tool_filter: ToolFilter | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        kinds = (StdioServerParameters, StreamableHttpServerParameters, SseServerParameters)
        if not isinstance(connection_params, kinds):
            raise ConfigurationError(
                "McpToolset needs StdioServerParameters, StreamableHttpServerParameters or SseServerParameters, "
                f"got {type(connection_params).__name__}"
            )
        check_timeout(timeout, "McpToolset timeout")
        super().__init__(tool_filter=tool_filter)
        self._params = connection_params
        self._timeout = timeout
        self._lock = threading.Lock()
        self._session: McpSession | None = None
        self._closed = False

    @property
    def connection_params(self) -> ConnectionParams:
        """How the server is reached."""
        return self._params

    @property
    def server_pid(self) -> int | None:
        """The process id of the stdio server while its session is open, else None."""
        session = self._session
        return None if session is None else session.server_pid

    def __repr__(self) -> str:
        return f"McpToolset({self._params!r})"

    def _session_now(self) -> McpSession:
        with self._lock:
            if self._closed:
                raise ToolError(f"{self!r} is closed")
            if self._session is None:
                from ._session import McpSession  # the mcp SDK is imported here, on first use

                _install_exit_hook()
                self._session = McpSession(self._params, tool_loop(), repr(self))
            return self._session

    async def _list(self) -> list[BaseTool]:
        listed = await self._session_now().list_tools()
        tools: list[BaseTool] = []
        for mcp_tool in listed:
            try:
                tool = McpTool(
                    self,
                    mcp_tool.name,
                    mcp_tool.description or "",
                    parameters_of(mcp_tool.name, mcp_tool.input_schema),
                    self._timeout,
                )
            except ConfigurationError as exc:
                _log.warning("%r: MCP tool %r left out: %s", self, mcp_tool.name, exc)
                continue
            if self.is_selected(tool):
                tools.append(tool)
        return tools

    def get_tools(self, readonly_context: Any = None) -> AwaitableObservable[list[BaseTool]]:
        """The server's tools that pass the filter, listed on first use and cached for the session.

        Await it, or ``.run()`` it from a thread that is not rxllm's tool loop. Fails with
        :class:`~rxllm.ToolError` when the server cannot be reached within the connection's
        ``timeout``.
        """
        return awaitable(defer_now(lambda: coroutine_observable(self._list(), tool_loop())))

    def close(self) -> None:
        """End the MCP session; a stdio server is stopped and reaped. Later use fails with ToolError."""
        with self._lock:
            self._closed = True
            session, self._session = self._session, None
        if session is not None:
            session.close()
