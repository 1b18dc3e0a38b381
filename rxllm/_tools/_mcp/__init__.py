"""Model Context Protocol support in the tool layer (private): toolsets of MCP servers, and serving tools.

- :mod:`._params`: the connection parameters (stdio, streamable HTTP, SSE); no ``mcp`` import.
- :mod:`._toolset`: ``McpToolset`` and ``McpTool``; imports the ``mcp`` SDK on first connection.
- :mod:`._session`: one MCP session owned by a task on rxllm's tool loop (connect, list, call,
  reconnect, close).
- :mod:`._stdio`: the stdio transport (message size limit, strict JSON-RPC, process reaping).
- :mod:`._schema`: an MCP tool's input schema as a declaration's parameters.
- :mod:`._results`: a ``CallToolResult`` as a function response.
- :mod:`._serve`: rxllm tools served as an MCP server (``rxllm.mcp.serve``).

Only :mod:`._params`, :mod:`._toolset`, :mod:`._schema` and :mod:`._results` are imported with
this package; the others import ``mcp`` and are imported when used.
"""

from ._params import ConnectionParams, SseServerParameters, StdioServerParameters, StreamableHttpServerParameters
from ._toolset import McpTool, McpToolset

__all__ = [
    "ConnectionParams",
    "McpTool",
    "McpToolset",
    "SseServerParameters",
    "StdioServerParameters",
    "StreamableHttpServerParameters",
]
