"""An MCP server written with the ``mcp`` SDK's own server API, for tests/test_mcp.py.

``python tests/mcp_fixture_server.py stdio`` serves it over stdio; :func:`build` gives the
``MCPServer`` for uvicorn (streamable HTTP). Modes that break the protocol on purpose:
``stdio-malformed`` (answers every request with a line that is not JSON-RPC), ``stdio-silent``
(never answers ``initialize``), ``stdio-nested`` (a tool whose schema refers to another file).
"""

from __future__ import annotations

import json
import os
import sys
import warnings

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import CallToolResult, EmbeddedResource, TextContent, TextResourceContents
from pydantic import BaseModel

cancelled: list[str] = []
cancel_seen = anyio.Event()


class Forecast(BaseModel):
    city: str
    celsius: int


def build(*, bad_schema: bool = False) -> MCPServer:
    server = MCPServer("fixture")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails."""
        raise ToolError(f"refused: {reason}")

    @server.tool()
    def pid() -> str:
        """The server's process id."""
        return json.dumps({"pid": os.getpid()})

    @server.tool()
    def forecast(city: str) -> Forecast:
        """Structured output."""
        return Forecast(city=city, celsius=21)

    @server.tool()
    def picture() -> Image:
        """An image."""
        return Image(data=b"\x89PNG\r\n\x1a\n" + b"\0" * 24, format="png")

    @server.tool()
    def document() -> CallToolResult:
        """An embedded text resource."""
        resource = TextResourceContents(uri="file:///notes.txt", mime_type="text/plain", text="hello notes")
        return CallToolResult(content=[TextContent(text="see the notes"), EmbeddedResource(resource=resource)])

    @server.tool()
    async def slow(label: str, ctx: Context) -> str:
        """Logs "started <label>", then waits until cancelled."""
        with warnings.catch_warnings():  # server logging is deprecated in the 2026-07-28 protocol, still served
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await ctx.info(f"started {label}")
        try:
            await anyio.sleep(120)
        except anyio.get_cancelled_exc_class():
            cancelled.append(label)
            cancel_seen.set()
            raise
        return "finished"

    @server.tool()
    async def cancellations() -> str:
        """The labels of the slow calls cancelled so far (waits up to 10 s for the first)."""
        with anyio.move_on_after(10):
            await cancel_seen.wait()
        return json.dumps(cancelled)

    @server.tool()
    def die() -> str:
        """Kills the server process mid-call."""
        os._exit(3)

    @server.tool()
    def huge(megabytes: int) -> CallToolResult:
        """A result of ``megabytes`` MB."""
        return CallToolResult(content=[TextContent(text="x" * (megabytes * 1024 * 1024))])

    if bad_schema:

        def nested(path: str) -> str:
            """Its schema is replaced by one with an external $ref."""
            return path

        server.add_tool(nested)
    return server


def _patch_nested_schema(server: MCPServer) -> None:
    tool = server._tool_manager.get_tool("nested")
    assert tool is not None
    tool.parameters = {"type": "object", "properties": {"path": {"$ref": "https://example.com/path.json"}}}


def _malformed() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" in message:
            sys.stdout.write('{"jsonrpc": "2.0", "id": ' + json.dumps(message["id"]) + ', "result": [1, 2\n')
            sys.stdout.flush()


def _silent() -> None:
    for _ in sys.stdin:
        pass


def main(mode: str) -> None:
    if mode == "stdio-malformed":
        _malformed()
    elif mode == "stdio-silent":
        _silent()
    else:
        server = build(bad_schema=mode == "stdio-nested")
        if mode == "stdio-nested":
            _patch_nested_schema(server)
        server.run("stdio")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "stdio")
