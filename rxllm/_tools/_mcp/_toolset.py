"""``McpToolset``: the tools of a Model Context Protocol server, as ADK Java's ``McpToolset``.

Nothing of the ``mcp`` SDK is imported until the toolset first connects (the ``mcp`` extra:
``pip install 'rxllm[mcp]'``). Sessions are opened on first use: listing the tools
(``get_tools()``, or the agent before a model call) or calling one. Under a runner, a toolset
has one session per runner (``session_scope="runner"``, the default: kept in the runner's
:class:`~rxllm._tools._scope.ResourceScope`, closed by ``Runner.close()``) or one per invocation
(``session_scope="invocation"``: closed when the invocation ends, before its completion passes
on); outside a runner (``get_tools()`` with no context) the toolset holds one of its own. Each
listed tool calls the session it was listed from. Tools are listed once per session and cached;
a session that dropped is opened again once on the next use (see ``rxllm._tools._mcp._session``).
``close()`` ends every session of the toolset and stops their stdio servers; sessions still open
when the process exits are closed by an exit hook, and any stdio server process left is killed,
so none is orphaned.

The agent that lists the toolset's tools through a session (before its model call) becomes that
session's *user*: a server's ``sampling/createMessage`` is answered by its model
(``rxllm._tools._mcp._requests``).
"""

from __future__ import annotations

import atexit
import logging
import threading
from typing import TYPE_CHECKING, Any, Literal

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

__all__ = ["McpTool", "McpToolset", "SessionScope"]

SessionScope = Literal["runner", "invocation"]
"""How long an MCP session lives under a runner: the runner's life, or one invocation."""

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
        self,
        toolset: McpToolset,
        session: McpSession,
        name: str,
        description: str,
        parameters: dict[str, Any],
        timeout: float | None,
    ) -> None:
        super().__init__(name=name, description=description, timeout=timeout)
        self._toolset = toolset
        self._session = session
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
            result = await self._session.call_tool(self.name, dict(args))
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
        session_scope: under a runner, ``"runner"`` (the default, ADK's one session per
            toolset: one per runner, closed by ``Runner.close()``) or ``"invocation"`` (a new
            session for every invocation, closed when it ends). Outside a runner the toolset
            holds one session of its own either way.

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
        session_scope: SessionScope = "runner",
    ) -> None:
        kinds = (StdioServerParameters, StreamableHttpServerParameters, SseServerParameters)
        if not isinstance(connection_params, kinds):
            raise ConfigurationError(
                "McpToolset needs StdioServerParameters, StreamableHttpServerParameters or SseServerParameters, "
                f"got {type(connection_params).__name__}"
            )
        check_timeout(timeout, "McpToolset timeout")
        if session_scope not in ("runner", "invocation"):
            raise ConfigurationError(f"session_scope must be 'runner' or 'invocation', got {session_scope!r}")
        super().__init__(tool_filter=tool_filter)
        self._params = connection_params
        self._timeout = timeout
        self._session_scope: SessionScope = session_scope
        self._lock = threading.Lock()
        self._session: McpSession | None = None
        # every session not closed yet, held strongly: a runner dropped without close() must not
        # let its session (and the task that owns the server) be collected while the server runs
        self._sessions: set[McpSession] = set()
        self._latest: McpSession | None = None
        self._closed = False

    @property
    def connection_params(self) -> ConnectionParams:
        """How the server is reached."""
        return self._params

    @property
    def session_scope(self) -> SessionScope:
        """How long a session lives under a runner: ``"runner"`` or ``"invocation"``."""
        return self._session_scope

    @property
    def server_pid(self) -> int | None:
        """The process id of the stdio server of the session opened last, while it is open; else None."""
        session = self._latest
        return None if session is None else session.server_pid

    def __repr__(self) -> str:
        return f"McpToolset({self._params!r})"

    def _new_session(self) -> McpSession:
        from ._session import McpSession  # the mcp SDK is imported here, on first use

        _install_exit_hook()
        session = McpSession(self._params, tool_loop(), repr(self))
        self._sessions = {s for s in self._sessions if not s.closed}
        self._sessions.add(session)
        self._latest = session
        return session

    def _session_for(self, readonly_context: Any) -> McpSession:
        """The session for a listing in ``readonly_context``: its runner's or invocation's, else the toolset's own."""
        scopes = getattr(readonly_context, "_toolset_scopes", None)
        with self._lock:
            if self._closed:
                raise ToolError(f"{self!r} is closed")
            if scopes is None:
                if self._session is None:
                    self._session = self._new_session()
                session = self._session
            else:
                scope = scopes.runner if self._session_scope == "runner" else scopes.invocation
                session = scope.resource(self, self._new_session)
        agent = getattr(readonly_context, "_invocation_agent", None)
        if agent is not None:
            session.agent = agent
        return session

    async def _list(self, session: McpSession) -> list[BaseTool]:
        listed = await session.list_tools()
        tools: list[BaseTool] = []
        for mcp_tool in listed:
            try:
                tool = McpTool(
                    self,
                    session,
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
        return awaitable(
            defer_now(lambda: coroutine_observable(self._list(self._session_for(readonly_context)), tool_loop()))
        )

    def close(self) -> None:
        """End every session of the toolset (its own and those in runners' or invocations' scopes);
        stdio servers are stopped and reaped. Later use fails with ToolError."""
        with self._lock:
            self._closed = True
            self._session = None
            sessions = list(self._sessions)
        for session in sessions:
            session.close()
