"""rxllm tools served over the Model Context Protocol (needs the ``mcp`` extra: ``pip install 'rxllm[mcp]'``).

``serve(tools)`` exposes function tools and ``AgentTool``s as an MCP server over stdio or streamable HTTP, so any MCP
client (an IDE, another agent framework, an rxllm ``McpToolset``) can call them; ``rxllm
mcp-serve module:attr`` does the same from the command line. ``mcp_server(tools)`` builds the
``mcp`` SDK ``Server`` to mount yourself (``.streamable_http_app()``). Using an MCP server's tools
from an agent is ``rxllm.agents.McpToolset``. See ``docs/mcp.md``.
"""

from __future__ import annotations

from ._tools._mcp._serve import mcp_server, serve

__all__ = ["mcp_server", "serve"]
