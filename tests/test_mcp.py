"""McpToolset and rxllm.mcp.serve against real MCP servers started here.

Servers: tests/mcp_fixture_server.py (written with the ``mcp`` SDK's own server API) as a stdio
subprocess and under uvicorn over streamable HTTP; the npm reference server
``@modelcontextprotocol/server-filesystem`` (installed once into pytest's cache directory); and
rxllm's own tools served with ``rxllm mcp-serve`` / ``rxllm.mcp.mcp_server``, driven by the
``mcp`` SDK's client.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import mcp
import mcp_fixture_server
from mcp_support import SERVER, LogLatch, Uvicorn, alive, call, function_responses, scripted_calls, stdio, tools_of

from rxllm import Chunk, ToolError, ToolTimeoutError
from rxllm._tools import ToolContext, execute_tool
from rxllm.agents import (
    InMemoryRunner,
    LlmAgent,
    McpToolset,
    SseServerParameters,
    StdioServerParameters,
    StreamableHttpServerParameters,
)
from rxllm.testing import ScriptedLlm, scripted_turn


@pytest.fixture(scope="module")
def stdio_toolset() -> Iterator[McpToolset]:
    toolset = McpToolset(stdio())
    yield toolset
    toolset.close()


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    server = mcp_fixture_server.build(bad_schema=True)
    mcp_fixture_server._patch_nested_schema(server)
    running = Uvicorn(server.streamable_http_app())
    yield running.url
    running.stop()


# -- listing, filtering, schemas ---------------------------------------------------------------


def test_stdio_lists_the_servers_tools_as_declarations(stdio_toolset: McpToolset) -> None:
    tools = tools_of(stdio_toolset)
    assert {"add", "echo", "fail", "slow", "forecast"} <= set(tools)
    declaration = tools["add"].declaration()
    assert declaration.description == "Add two integers."
    assert declaration.parameters["type"] == "object"
    assert declaration.parameters["required"] == ["a", "b"]
    assert declaration.parameters["properties"]["a"]["type"] == "integer"
    assert isinstance(stdio_toolset.server_pid, int) and alive(stdio_toolset.server_pid)


def test_tool_filter_by_names_and_by_predicate(http_url: str) -> None:
    with McpToolset(StreamableHttpServerParameters(http_url), tool_filter=["add", "echo", "nope"]) as named:
        assert sorted(tools_of(named)) == ["add", "echo"]
    with McpToolset(StreamableHttpServerParameters(http_url), tool_filter=lambda t: t.name.startswith("f")) as pred:
        assert sorted(tools_of(pred)) == ["fail", "forecast"]


def test_a_schema_a_model_cannot_take_leaves_that_tool_out(http_url: str, caplog: pytest.LogCaptureFixture) -> None:
    with McpToolset(StreamableHttpServerParameters(http_url)) as toolset, caplog.at_level(logging.WARNING):
        tools = tools_of(toolset)
    assert "nested" not in tools and "add" in tools
    assert any("'nested' left out" in r.getMessage() and "example.com" in r.getMessage() for r in caplog.records)


# -- calls and results ------------------------------------------------------------------------


def test_results_map_as_adk_does(stdio_toolset: McpToolset) -> None:
    tools = tools_of(stdio_toolset)
    assert call(tools["echo"], {"text": "hi"})["text_output"] == [{"text": "hi"}]
    forecast = call(tools["forecast"], {"city": "Oslo"})
    assert forecast == {
        "text_output": [{"city": "Oslo", "celsius": 21}],
        "structured_content": {"city": "Oslo", "celsius": 21},
    }
    assert call(tools["picture"], {}) == {"text_output": [{"image": {"mime_type": "image/png", "size_bytes": 32}}]}
    assert call(tools["document"], {})["text_output"] == [
        {"text": "see the notes"},
        {"resource": {"uri": "file:///notes.txt", "mime_type": "text/plain", "text": "hello notes"}},
    ]


def test_is_error_and_bad_arguments_are_tool_errors(stdio_toolset: McpToolset) -> None:
    tools = tools_of(stdio_toolset)
    with pytest.raises(ToolError, match=r"Tool execution failed\. Details: .*refused: no"):
        call(tools["fail"], {"reason": "no"})
    with pytest.raises(ToolError, match="Tool execution failed"):
        call(tools["add"], {"a": "not a number", "b": 1})


def test_http_call(http_url: str) -> None:
    with McpToolset(StreamableHttpServerParameters(http_url)) as toolset:
        assert call(tools_of(toolset)["add"], {"a": 40, "b": 2})["structured_content"] == {"result": 42}


def test_sse_call() -> None:
    running = Uvicorn(mcp_fixture_server.build().sse_app(), path="/sse")
    try:
        with McpToolset(SseServerParameters(running.url), tool_filter=["echo"]) as toolset:
            tools = tools_of(toolset)
            assert list(tools) == ["echo"]
            assert call(tools["echo"], {"text": "over sse"})["text_output"] == [{"text": "over sse"}]
    finally:
        running.stop()


# -- cancellation -------------------------------------------------------------------------------


def _slow_then_dispose(toolset: McpToolset, label: str) -> list[str]:
    tools = tools_of(toolset)
    errors: list[Exception] = []
    with LogLatch(f"started {label}") as latch:
        subscription = execute_tool(tools["slow"], {"label": label}, ToolContext.standalone()).subscribe(
            on_error=errors.append
        )
        assert latch.seen.wait(15), "the server never started the slow call"
    subscription.dispose()
    assert errors == []
    return json.loads(call(tools["cancellations"], {})["text_output"][0]["text"])


def test_disposing_a_stdio_call_sends_notifications_cancelled(stdio_toolset: McpToolset) -> None:
    assert "stdio-dispose" in _slow_then_dispose(stdio_toolset, "stdio-dispose")


def test_disposing_an_http_call_cancels_it_on_the_server(http_url: str) -> None:
    with McpToolset(StreamableHttpServerParameters(http_url)) as toolset:
        assert "http-dispose" in _slow_then_dispose(toolset, "http-dispose")


def test_a_tool_timeout_cancels_the_call_on_the_server(http_url: str) -> None:
    with McpToolset(StreamableHttpServerParameters(http_url), timeout=0.5) as toolset:
        tools = tools_of(toolset)
        with pytest.raises(ToolTimeoutError):
            call(tools["slow"], {"label": "timed-out"})
        assert "timed-out" in json.loads(call(tools["cancellations"], {})["text_output"][0]["text"])


# -- lifecycle: crash, reconnect, limits, reaping ----------------------------------------------


def test_killed_server_is_a_tool_error_then_reconnects_then_close_reaps() -> None:
    toolset = McpToolset(stdio())
    try:
        tools = tools_of(toolset)
        first = toolset.server_pid
        assert first is not None
        with pytest.raises(ToolError, match="MCP session ended"):
            call(tools["die"], {})
        assert call(tools["add"], {"a": 1, "b": 2})["structured_content"] == {"result": 3}  # one reconnect
        second = toolset.server_pid
        assert second is not None and second != first and not alive(first)
        # a 100 MB result is refused: over the 16 MiB message limit, the session ends with that reason
        with pytest.raises(ToolError, match="larger than 16777216 bytes"):
            call(tools["huge"], {"megabytes": 100})
        assert not alive(second)
        assert call(tools["echo"], {"text": "still here"})["text_output"] == [{"text": "still here"}]
        third = toolset.server_pid
    finally:
        toolset.close()
    assert third is not None and not alive(third)
    with pytest.raises(ToolError, match="closed"):
        toolset.get_tools().run()


def test_malformed_json_rpc_is_a_clear_error_and_the_process_is_reaped() -> None:
    toolset = McpToolset(stdio("stdio-malformed", timeout=60))  # a loaded machine starts python slowly
    with pytest.raises(ToolError, match="malformed JSON-RPC"):
        toolset.get_tools().run()
    toolset.close()


def test_a_server_that_never_answers_initialize_times_out() -> None:
    toolset = McpToolset(stdio("stdio-silent", timeout=1))
    with pytest.raises(ToolError, match="did not complete the handshake within 1 s"):
        toolset.get_tools().run()
    assert toolset.server_pid is None
    toolset.close()


def test_a_server_left_open_is_reaped_when_the_process_exits(tmp_path: Path) -> None:
    script = tmp_path / "leave_open.py"
    script.write_text(
        "import sys\n"
        "from rxllm.agents import McpToolset, StdioServerParameters\n"
        f"toolset = McpToolset(StdioServerParameters(sys.executable, [{SERVER!r}, 'stdio']))\n"
        "toolset.get_tools().run()\n"
        "print(toolset.server_pid, flush=True)\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True)
    assert not alive(int(done.stdout.strip()))


def test_importing_rxllm_imports_no_mcp() -> None:
    code = (
        "import sys, rxllm, rxllm.agents\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


# -- an agent with toolsets --------------------------------------------------------------------


def test_an_agent_uses_a_toolset_and_a_broken_one_does_not_stop_the_run(
    http_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    working = McpToolset(StreamableHttpServerParameters(http_url))
    broken = McpToolset(stdio("stdio-silent", timeout=0.5))
    model = ScriptedLlm([scripted_calls(("c1", "add", {"a": 2, "b": 5})), scripted_turn(Chunk(text_delta="7."))])
    agent = LlmAgent("calc", model, tools=[working, broken])
    with caplog.at_level(logging.WARNING), InMemoryRunner(agent, app_name="app") as runner:
        responses = function_responses(runner, "2+5?")
    broken.close()
    working.close()
    assert responses["c1"]["structured_content"] == {"result": 7}
    declared = {d.name for t in model.requests[0][0].config.tools for d in t.function_declarations}
    assert {"add", "slow"} <= declared
    assert any("listed no tools" in r.getMessage() for r in caplog.records)


# -- the npm reference filesystem server ---------------------------------------------------------


FILESYSTEM_SERVER_VERSION = "2026.8.31"  # the npm package version the test was written against


@pytest.fixture(scope="module")
def filesystem_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed (.ci/run installs them from Debian's packages)")
    # pytest's cache keeps the install between runs; without the cache plugin, a temp dir per run
    cache_plugin = getattr(request.config, "cache", None)
    cache = Path(cache_plugin.mkdir("mcp-npm")) if cache_plugin is not None else tmp_path_factory.mktemp("mcp-npm")
    entry = cache / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
    if not entry.exists():
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(cache),
             f"@modelcontextprotocol/server-filesystem@{FILESYSTEM_SERVER_VERSION}"],
            check=True, capture_output=True, timeout=300,
        )
    return entry


def test_the_reference_filesystem_server_driven_by_an_agent(filesystem_server: Path, tmp_path: Path) -> None:
    root = (tmp_path / "allowed").resolve()
    root.mkdir()
    (root / "notes.txt").write_text("buy milk\n")
    (root / "docs").mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    toolset = McpToolset(
        StdioServerParameters("node", [str(filesystem_server), str(root)], timeout=20),
        tool_filter=["list_directory", "read_text_file"],
    )
    model = ScriptedLlm([
        scripted_calls(("c1", "list_directory", {"path": str(root)})),
        scripted_calls(("c2", "read_text_file", {"path": str(root / "notes.txt")})),
        scripted_calls(("c3", "read_text_file", {"path": str(secret)})),
        scripted_turn(Chunk(text_delta="Done.")),
    ])
    agent = LlmAgent("files", model, tools=[toolset])
    try:
        responses = function_responses(InMemoryRunner(agent, app_name="app"), "What is in my notes?")
    finally:
        toolset.close()
    listing = responses["c1"]["text_output"][0]["text"]
    assert "[FILE] notes.txt" in listing and "[DIR] docs" in listing
    assert "buy milk" in json.dumps(responses["c2"])
    assert "error" in responses["c3"] and "top secret" not in json.dumps(responses["c3"])
    declared = {d.name for t in model.requests[0][0].config.tools for d in t.function_declarations}
    assert declared == {"list_directory", "read_text_file"}


# -- serving rxllm tools --------------------------------------------------------------------------


def test_the_mcp_sdk_client_against_rxllm_mcp_serve_over_stdio(tmp_path: Path) -> None:
    (tmp_path / "served_tools.py").write_text(
        "from rxllm import Chunk\n"
        "from rxllm.agents import AgentTool, LlmAgent\n"
        "from rxllm.testing import ScriptedLlm, scripted_turn\n"
        "def get_order(order_id: str) -> dict:\n"
        "    '''Look an order up.'''\n"
        "    if order_id == 'bad':\n"
        "        raise ValueError('no such order')\n"
        "    return {'order_id': order_id, 'status': 'shipped'}\n"
        "model = ScriptedLlm([scripted_turn(Chunk(text_delta='Your order ships today.'))])\n"
        "support = AgentTool(LlmAgent('support', model, description='Answers order questions.'))\n"
        "tools = [get_order, support]\n"
    )
    params = mcp.StdioServerParameters(
        command=sys.executable, args=["-m", "rxllm", "mcp-serve", "served_tools:tools"], cwd=str(tmp_path),
        env={"PYTHONPATH": os.pathsep.join(sys.path)},
    )

    async def talk() -> tuple[Any, ...]:
        from mcp.client.session import ClientSession
        from mcp.client.stdio import stdio_client

        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            ok = await session.call_tool("get_order", {"order_id": "A17"})
            bad = await session.call_tool("get_order", {"order_id": "bad"})
            answer = await session.call_tool("support", {"request": "When does A17 ship?"})
            return listed, ok, bad, answer

    listed, ok, bad, answer = asyncio.run(talk())
    tools = {t.name: t for t in listed.tools}
    assert sorted(tools) == ["get_order", "support"]
    assert tools["get_order"].input_schema["required"] == ["order_id"]
    assert tools["support"].description == "Answers order questions."
    assert ok.structured_content == {"order_id": "A17", "status": "shipped"} and not ok.is_error
    assert bad.is_error and "no such order" in bad.content[0].text
    assert answer.structured_content == {"result": "Your order ships today."} and not answer.is_error


def test_an_mcp_toolset_against_rxllm_served_over_streamable_http() -> None:
    from rxllm.mcp import mcp_server

    async def wait(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "waited"

    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    running = Uvicorn(mcp_server([shout, wait], name="served").streamable_http_app())
    try:
        with McpToolset(StreamableHttpServerParameters(running.url)) as toolset:
            tools = tools_of(toolset)
            assert tools["shout"].declaration().description == "Upper-case the text."
            assert call(tools["shout"], {"text": "hi"})["structured_content"] == {"result": "HI"}
            with pytest.raises(ToolError, match=r"Details: .*invalid arguments"):
                call(tools["shout"], {"words": "hi"})
    finally:
        running.stop()
