"""rxllm tools served as an MCP server, on the ``mcp`` SDK's low-level ``Server`` (imported when used).

Each tool with a declaration is listed with its name, description and parameters schema as the
``inputSchema``. A call runs the tool as a runtime does (:func:`~rxllm._tools.execute_tool`: a
synchronous function on the tool worker pool, an ``async def`` one on rxllm's tool loop, with its
timeout) and a :class:`~rxllm._tools.ToolContext` of its own (``ToolContext.standalone``: a fresh
state per call, no session). The result dict is sent as JSON text and as ``structuredContent``;
a failed call (bad arguments, an exception, a timeout, an unknown tool) as ``isError: true``
with the message as text, so the client's model sees it. A client's ``notifications/cancelled``
cancels the handler, which disposes the run (an ``async def`` tool is cancelled).

An ``AgentTool`` (an agent as a tool) is served like any tool: each call runs its agent on a
fresh in-memory session (see ``rxllm.agents._runners.agent_tool``), and the sessions its MCP
toolsets open end with the call.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Literal

import anyio
import mcp_types
from mcp.server import Server
from mcp.server.stdio import stdio_server

from ..._core.errors import ConfigurationError, ToolError
from ..._rx.aio import last
from .._context import ToolContext
from .._execution import ToolRuntime, execute_tool
from .._tool import BaseTool, ToolLike, tools_by_name

__all__ = ["mcp_server", "serve"]

Transport = Literal["stdio", "streamable-http"]


def _error(text: str) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(text=text)], is_error=True)


def mcp_server(tools: Iterable[ToolLike], *, name: str = "rxllm", tool_timeout: float | None = None) -> Server[Any]:
    """An ``mcp.server.Server`` listing and calling ``tools`` (plain callables are wrapped in ``FunctionTool``).

    Raises:
        ConfigurationError: for something that is not a tool, two tools with one name, or no tool
            with a declaration.
    """
    by_name = {tool.name: tool for tool in tools_by_name(tools, f"MCP server {name!r}").values() if tool.declaration()}
    if not by_name:
        raise ConfigurationError(f"MCP server {name!r}: no tool to serve (a tool needs a declaration)")
    runtime = ToolRuntime(timeout=tool_timeout)

    def listing(tool: BaseTool) -> mcp_types.Tool:
        declaration = tool.declaration()
        assert declaration is not None
        schema = dict(declaration.parameters or {"type": "object", "properties": {}})
        return mcp_types.Tool(name=tool.name, description=declaration.description, input_schema=schema)

    listed = [listing(tool) for tool in by_name.values()]

    async def on_list_tools(_: Any, __: Any) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=listed)

    async def on_call_tool(_: Any, params: mcp_types.CallToolRequestParams) -> mcp_types.CallToolResult:
        tool = by_name.get(params.name)
        if tool is None:
            return _error(f"unknown tool {params.name!r}")
        context = ToolContext.standalone(agent_name=name)
        try:
            result = await last(execute_tool(tool, dict(params.arguments or {}), context, runtime))
        except ToolError as exc:
            return _error(str(exc))
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(text=json.dumps(result, ensure_ascii=False))], structured_content=result
        )

    return Server(name, on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def serve(
    tools: Iterable[ToolLike],
    transport: Transport = "stdio",
    *,
    name: str = "rxllm",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    tool_timeout: float | None = None,
) -> None:
    """Serve ``tools`` over MCP until the client leaves (stdio) or the process is stopped (HTTP).

    Args:
        tools: tools to expose: function tools (or plain callables), ``AgentTool``s, any ``BaseTool``.
        transport: ``"stdio"`` (this process's stdin and stdout) or ``"streamable-http"`` (uvicorn
            on ``host:port``, endpoint ``path``).
        name: the server's name in the MCP handshake.
        tool_timeout: seconds a call may take when its tool sets no timeout.
    """
    server = mcp_server(tools, name=name, tool_timeout=tool_timeout)
    if transport == "stdio":

        async def run_stdio() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(run_stdio)
    elif transport == "streamable-http":
        import uvicorn

        app = server.streamable_http_app(streamable_http_path=path, host=host)
        uvicorn.run(app, host=host, port=port, log_level="warning")
    else:
        raise ConfigurationError(f"transport must be 'stdio' or 'streamable-http', got {transport!r}")
