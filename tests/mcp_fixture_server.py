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
from typing import Annotated

import anyio
from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context, ListRoots, MCPServer, Resolve, Sample
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resolve import Elicit
from mcp.server.mcpserver.utilities.types import Image
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import (
    CallToolResult,
    CreateMessageResult,
    EmbeddedResource,
    ListRootsResult,
    SamplingMessage,
    TextContent,
    TextResourceContents,
)
from pydantic import BaseModel

cancelled: list[str] = []
cancel_seen = anyio.Event()
meeting: dict[str, int] = {}
meeting_full = anyio.Event()


class Forecast(BaseModel):
    city: str
    celsius: int


class Name(BaseModel):
    name: str


def _summary_request(text: str) -> Sample:
    message = SamplingMessage(role="user", content=TextContent(text=f"Summarize: {text}"))
    return Sample([message], max_tokens=64, system_prompt="Answer in five words.", temperature=0.2)


def _name_request() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


def _roots_request() -> ListRoots:
    return ListRoots()


def _sse_session(ctx: Context) -> str:
    request = ctx.request_context.request
    return str(getattr(request, "query_params", {}).get("session_id"))


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
    def summarize(text: str, summary: Annotated[CreateMessageResult, Resolve(_summary_request)]) -> str:
        """Asks the client's model (sampling/createMessage) to summarize the text."""
        content = summary.content
        assert isinstance(content, TextContent)
        return json.dumps({"model": summary.model, "summary": content.text})

    @server.tool()
    def ask_name(name: Annotated[ElicitationResult[Name], Resolve(_name_request)]) -> str:
        """Asks the client's user for a name (elicitation/create)."""
        return repr(name)

    @server.tool()
    def roots(found: Annotated[ListRootsResult, Resolve(_roots_request)]) -> str:
        """Asks the client for its roots (roots/list)."""
        return json.dumps([str(root.uri) for root in found.roots])

    @server.tool()
    async def headers(ctx: Context) -> str:
        """The request's X-Rxllm-* headers and whether it had an Authorization; logs that value at info."""
        found = {k.lower(): v for k, v in (ctx.headers or {}).items()}
        seen: dict[str, object] = {k: v for k, v in found.items() if k.startswith("x-rxllm")}
        seen["authorization_present"] = "authorization" in found
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await ctx.info(f"auth was {found.get('authorization', '-')}")
        return json.dumps(seen)

    @server.tool()
    async def meet(count: int, ctx: Context) -> str:
        """Waits (up to 10 s) until ``count`` meet calls are in flight at once; returns the MCP session's id."""
        meeting["arrived"] = meeting.get("arrived", 0) + 1
        if meeting["arrived"] >= count:
            meeting_full.set()
        with anyio.move_on_after(10):
            await meeting_full.wait()
        return json.dumps({"session": _sse_session(ctx), "all_met": meeting_full.is_set()})

    @server.tool()
    def session_id(ctx: Context) -> str:
        """The SSE connection the call came on (the ``session_id`` of the messages endpoint)."""
        return _sse_session(ctx)

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
