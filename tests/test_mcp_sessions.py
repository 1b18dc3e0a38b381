"""MCP sessions under a runner, server-to-client requests, SSE sessions, and AgentTools served over MCP.

Servers: tests/mcp_fixture_server.py (the ``mcp`` SDK's own server API) as a stdio subprocess and
under uvicorn (streamable HTTP and SSE) in this process; rxllm's ``mcp_server`` under uvicorn,
driven by the ``mcp`` SDK's own client.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import select
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mcp")

import httpx2
import mcp
import mcp_fixture_server
from mcp_support import LogLatch, Uvicorn, alive, call, function_responses, scripted_calls, stdio, tools_of

from rxllm import Chunk, ConfigurationError, ToolError
from rxllm._tools import ToolContext, execute_tool
from rxllm.agents import (
    AgentTool,
    InMemoryRunner,
    LlmAgent,
    McpToolset,
    SseServerParameters,
    StreamableHttpServerParameters,
)
from rxllm.testing import ScriptedLlm, scripted_turn

SECRET = "Bearer s3cr3t-mcp-token-0042"


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    running = Uvicorn(mcp_fixture_server.build().streamable_http_app())
    yield running.url
    running.stop()


@pytest.fixture(scope="module")
def sse_url() -> Iterator[str]:
    running = Uvicorn(mcp_fixture_server.build().sse_app(), path="/sse")
    yield running.url
    running.stop()


def _final(text: str) -> Any:
    return scripted_turn(Chunk(text_delta=text))


# -- lifecycle: one session per runner, or per invocation ------------------------------------------


def _pid(responses: dict[str, Any], call_id: str) -> int:
    pid: int = responses[call_id]["text_output"][0]["pid"]
    return pid


def test_one_session_per_runner_shared_by_invocations_ended_by_runner_aclose() -> None:
    toolset = McpToolset(stdio(), tool_filter=["pid"])
    model = ScriptedLlm([
        scripted_calls(("c1", "pid", {})), _final("one"),
        scripted_calls(("c2", "pid", {})), _final("two"),
    ])
    runner = InMemoryRunner(LlmAgent("ops", model, tools=[toolset]), app_name="app")
    first = _pid(function_responses(runner, "pid?", "s1"), "c1")
    second = _pid(function_responses(runner, "pid?", "s2"), "c2")
    assert first == second and alive(first)  # both invocations used the runner's one session
    asyncio.run(runner.aclose())
    assert not alive(first)  # reaped before aclose() returned
    toolset.close()


def test_a_per_invocation_session_closes_when_the_invocation_ends_or_is_disposed() -> None:
    toolset = McpToolset(stdio(), tool_filter=["pid", "slow"], session_scope="invocation")
    model = ScriptedLlm([
        scripted_calls(("c1", "pid", {})), _final("done"),
        scripted_calls(("c2", "slow", {"label": "per-invocation"})),
    ])
    with InMemoryRunner(LlmAgent("ops", model, tools=[toolset]), app_name="app") as runner:
        pid = _pid(function_responses(runner, "pid?"), "c1")
        assert not alive(pid)  # the run completed only after its session closed and the server was reaped
        # a second invocation gets a new session; disposing it mid-call stops that server too
        runner.session_service.create_session("app", "u", session_id="s2").run()
        with LogLatch("started per-invocation") as latch:
            subscription = runner.run_async("u", "s2", "slow?").subscribe(on_error=lambda _: None)
            assert latch.seen.wait(30), "the server never started the slow call"
        second = toolset.server_pid
        assert second is not None and second != pid
        exited = os.pidfd_open(second)  # readable once the process has exited: no polling
        try:
            subscription.dispose()
            assert select.select([exited], [], [], 30)[0], "the disposed invocation's server is still running"
        finally:
            os.close(exited)
    toolset.close()


def test_an_agent_tools_toolsets_share_the_calling_runners_session(http_url: str) -> None:
    toolset = McpToolset(StreamableHttpServerParameters(http_url), tool_filter=["echo"])
    inner = ScriptedLlm([
        scripted_calls((f"e{n}", "echo", {"text": n})) if step == 0 else _final(f"echoed {n}")
        for n in "abcd" for step in (0, 1)
    ])
    helper = AgentTool(LlmAgent("helper", inner, description="Echoes.", tools=[toolset]))
    outer = ScriptedLlm([
        scripted_calls((f"h{n}", "helper", {"request": n})) if step == 0 else _final(n)
        for n in "abc" for step in (0, 1)
    ])
    runner = InMemoryRunner(LlmAgent("boss", outer, tools=[helper]), app_name="app")
    assert function_responses(runner, "a", "s1")["ha"] == {"result": "echoed a"}
    assert function_responses(runner, "b", "s2")["hb"] == {"result": "echoed b"}
    sessions = list(toolset._sessions)
    assert len(sessions) == 1 and sessions[0].server_pid is None  # one session for both calls (HTTP: no pid)
    runner.close()
    assert sessions[0].closed and sessions[0]._live is None  # the caller's runner closed it
    # the runner stays usable: the next run opens a new session
    assert function_responses(runner, "c", "s3")["hc"] == {"result": "echoed c"}
    reopened = [s for s in toolset._sessions if s is not sessions[0]]
    assert len(reopened) == 1 and not reopened[0].closed
    runner.close()
    # called outside a runner, the agent tool's sessions end with the call
    assert execute_tool(helper, {"request": "d"}, ToolContext.standalone()).run() == {"result": "echoed d"}
    assert len(toolset._sessions) == 1 and all(s.closed for s in toolset._sessions)
    toolset.close()


def test_session_scope_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="session_scope"):
        McpToolset(stdio(), session_scope="call")  # type: ignore[arg-type]


# -- server-to-client requests: sampling, elicitation, roots, logging -------------------------------


def test_sampling_is_answered_by_the_agents_model(http_url: str) -> None:
    toolset = McpToolset(StreamableHttpServerParameters(http_url), tool_filter=["summarize"])
    model = ScriptedLlm([
        scripted_calls(("c1", "summarize", {"text": "MCP lets agents use any server's tools."})),
        _final("Agents use MCP tools."),  # the sampling request
        _final("Summarized."),
    ])
    with InMemoryRunner(LlmAgent("writer", model, tools=[toolset]), app_name="app") as runner:
        responses = function_responses(runner, "Summarize it.")
    toolset.close()
    assert responses["c1"]["text_output"] == [{"model": "scripted", "summary": "Agents use MCP tools."}]
    sampling = model.requests[1][0]  # the server's sampling/createMessage, as an LlmRequest
    assert sampling.config.system_instruction.text() == "Answer in five words."
    assert sampling.config.max_output_tokens == 64 and sampling.config.temperature == 0.2
    assert [(c.role, c.text()) for c in sampling.contents] == [
        ("user", "Summarize: MCP lets agents use any server's tools.")
    ]
    assert len(model.requests) == 3  # the run went on to the final answer


def test_elicitation_and_roots_are_refused_and_the_run_goes_on(http_url: str) -> None:
    toolset = McpToolset(StreamableHttpServerParameters(http_url), tool_filter=["ask_name", "roots", "echo"])
    model = ScriptedLlm([
        scripted_calls(("c1", "ask_name", {}), ("c2", "roots", {}), ("c3", "echo", {"text": "still here"})),
        _final("ok"),
    ])
    with InMemoryRunner(LlmAgent("asker", model, tools=[toolset]), app_name="app") as runner:
        responses = function_responses(runner, "Who am I?")
    toolset.close()
    assert "elicitation is not supported" in responses["c1"]["error"]
    assert "roots are not supported" in responses["c2"]["error"]
    assert responses["c3"]["text_output"] == [{"text": "still here"}]
    assert len(model.requests) == 2


def test_sampling_outside_an_agent_is_refused(http_url: str) -> None:
    toolset = McpToolset(StreamableHttpServerParameters(http_url), tool_filter=["summarize"])
    with toolset, pytest.raises(ToolError, match="sampling refused: the toolset is not used by an agent"):
        call(tools_of(toolset)["summarize"], {"text": "x"})


def test_headers_reach_the_server_and_server_logs_are_forwarded_redacted(
    http_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    params = StreamableHttpServerParameters(http_url, headers={"Authorization": SECRET, "X-Rxllm-Trace": "t-17"})
    with McpToolset(params, tool_filter=["headers"]) as toolset, caplog.at_level(logging.INFO, "rxllm.mcp"):
        seen = call(tools_of(toolset)["headers"], {})["text_output"][0]
    assert seen == {"x-rxllm-trace": "t-17", "authorization_present": True}
    forwarded = [r for r in caplog.records if r.name == "rxllm.mcp" and "server log" in r.getMessage()]
    assert any("auth was ***" in r.getMessage() for r in forwarded)
    assert all("s3cr3t" not in r.getMessage() for r in caplog.records)
    assert "s3cr3t" not in repr(toolset)


# -- SSE: one session, many calls; headers; a custom httpx2 client ------------------------------------


def test_one_sse_session_takes_sequential_and_concurrent_calls(sse_url: str) -> None:
    with McpToolset(SseServerParameters(sse_url), tool_filter=["session_id", "meet", "add"]) as toolset:
        tools = tools_of(toolset)
        sessions = {call(tools["session_id"], {})["text_output"][0]["text"] for _ in range(3)}
        assert len(sessions) == 1  # three sequential calls, one server-side session
        for n in range(3):
            assert call(tools["add"], {"a": n, "b": 1})["structured_content"] == {"result": n + 1}
        # four calls at once: each waits on the server until all four are in flight
        results: list[Any] = []
        errors: list[Exception] = []
        lock = threading.Lock()
        all_done = threading.Event()

        def finished() -> None:
            with lock:
                if len(results) + len(errors) == 4:
                    all_done.set()

        def failed(error: Exception) -> None:
            errors.append(error)
            finished()

        subscriptions = [
            execute_tool(tools["meet"], {"count": 4}, ToolContext.standalone()).subscribe(
                results.append, failed, finished
            )
            for _ in range(4)
        ]
        assert all_done.wait(30), "the concurrent calls did not finish"
        for subscription in subscriptions:
            subscription.dispose()
    assert errors == []
    met = [json.loads(r["text_output"][0]["text"]) if "text" in r["text_output"][0] else r["text_output"][0]
           for r in results]
    assert len(met) == 4 and all(m["all_met"] for m in met)  # all four were in flight at once
    assert {m["session"] for m in met} == sessions  # on the same SSE connection


def test_sse_headers_and_a_custom_httpx2_client_factory(sse_url: str) -> None:
    made: list[dict[str, Any]] = []
    sent: list[str] = []

    async def record(request: httpx2.Request) -> None:
        sent.append(request.method)

    def factory(headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None) -> httpx2.AsyncClient:
        made.append({"headers": dict(headers or {}), "timeout": timeout})
        merged = {**(headers or {}), "X-Rxllm-Factory": "yes"}
        return httpx2.AsyncClient(headers=merged, timeout=timeout, auth=auth, event_hooks={"request": [record]})

    params = SseServerParameters(
        sse_url, headers={"Authorization": SECRET, "X-Rxllm-Trace": "sse-1"}, httpx_client_factory=factory
    )
    with McpToolset(params, tool_filter=["headers"]) as toolset:
        seen = call(tools_of(toolset)["headers"], {})["text_output"][0]
    assert seen == {"x-rxllm-trace": "sse-1", "x-rxllm-factory": "yes", "authorization_present": True}
    assert made and made[0]["headers"]["Authorization"] == SECRET
    assert "GET" in sent and "POST" in sent  # the SSE stream and the messages went through our client
    assert "s3cr3t" not in repr(params) and "s3cr3t" not in repr(toolset)


def test_http_errors_and_reprs_never_show_header_secrets(sse_url: str) -> None:
    wrong = sse_url.replace("/sse", "/nowhere")
    params = SseServerParameters(wrong, headers={"X-Session-Ref": "ref-s3cr3t-77"}, secret_names=["x-session-ref"],
                                 timeout=5)
    assert "s3cr3t" not in repr(params)
    with McpToolset(params) as toolset, pytest.raises(ToolError) as failure:
        toolset.get_tools().run()
    assert "s3cr3t" not in str(failure.value)
    with pytest.raises(ConfigurationError, match="plain http://"):
        StreamableHttpServerParameters("http://mcp.example.com/mcp", headers={"Authorization": SECRET})
    assert StreamableHttpServerParameters(
        "http://mcp.example.com/mcp", headers={"Authorization": SECRET}, allow_insecure_key=True
    ).allow_insecure_key


# -- serving an AgentTool over MCP ---------------------------------------------------------------------


def test_the_mcp_sdk_client_calls_an_agent_tool_served_over_streamable_http() -> None:
    from rxllm.mcp import mcp_server

    model = ScriptedLlm([_final("Bonjour le monde")])
    translator = AgentTool(LlmAgent("translator", model, description="Translates to French."))

    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    running = Uvicorn(mcp_server([translator, shout], name="agents").streamable_http_app())

    async def talk() -> tuple[Any, Any, Any]:
        async with mcp.Client(running.url) as client:
            listed = await client.list_tools()
            translated = await client.call_tool("translator", {"request": "Hello world"})
            bad = await client.call_tool("translator", {"text": "no request"})
            return listed, translated, bad

    try:
        listed, translated, bad = asyncio.run(talk())
    finally:
        running.stop()
    tools = {t.name: t for t in listed.tools}
    assert tools["translator"].description == "Translates to French."
    assert tools["translator"].input_schema["required"] == ["request"] and "shout" in tools
    assert translated.structured_content == {"result": "Bonjour le monde"} and not translated.is_error
    assert model.requests[0][0].contents[-1].text() == "Hello world"
    assert bad.is_error and "request" in bad.content[0].text
