"""Hostile tool input and output over a real loopback server: a tool result past the documented
cap (4 MiB, ``RXLLM_MAX_TOOL_RESULT_BYTES``) becomes an error result that is stored and sent
instead of the result; ``NaN`` / ``Infinity`` in a model's tool arguments are malformed, exactly
like arguments that are not JSON, and never reach the tool."""

from __future__ import annotations

import json
from typing import Any

import pytest
from reactivex import operators as ops

from rxllm import HttpTransport, RetryPolicy
from rxllm._tools._calls import DEFAULT_MAX_TOOL_RESULT_BYTES
from rxllm.agents import RunConfig, StreamingMode
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import StubResponse, StubServer

from .support import SESSION, USER, history, make_runner, question

SSE = RunConfig(streaming_mode=StreamingMode.SSE)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [choice]})


def tool_call(arguments: str) -> StubResponse:
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "fetch", "arguments": arguments}}
    return StubResponse.sse([_chunk({"role": "assistant", "tool_calls": [call]}), _chunk({}, "tool_calls"), "[DONE]"])


def answer(text: str) -> StubResponse:
    return StubResponse.sse([_chunk({"role": "assistant", "content": text}), _chunk({}, "stop"), "[DONE]"])


def run_with(tool: Any, responses: list[StubResponse]) -> tuple[list[Any], list[Any], Any]:
    transport = HttpTransport(max_concurrent_streams=2)
    try:
        with StubServer(responses) as server:
            model = OpenAiChatModel("m", base_url=server.url + "/v1", api_key="sk-test-not-real", transport=transport,
                                    retry_policy=RetryPolicy.never())
            runner = make_runner(model, tools=[tool])
            events = runner.run_async(USER, SESSION, question(), SSE).pipe(
                ops.materialize(), ops.to_list()).run()
            bodies = [request.json() for request in server.requests]
    finally:
        transport.close()
    return events, bodies, runner


def test_a_result_past_the_cap_is_an_error_result_stored_and_sent_instead() -> None:
    def fetch(url: str) -> str:
        """Fetch a page."""
        return "x" * (2 * DEFAULT_MAX_TOOL_RESULT_BYTES)

    events, bodies, runner = run_with(fetch, [tool_call('{"url": "u"}'), answer("Too big.")])
    values = [n.value for n in events if n.kind == "N"]
    assert values[-1].text() == "Too big."
    [response] = [r.response for e in values for r in e.function_responses()]
    assert "larger than 4194304 bytes" in response["error"] and "RXLLM_MAX_TOOL_RESULT_BYTES" in response["error"]
    tool_message = next(m for m in bodies[1]["messages"] if m["role"] == "tool")
    assert len(tool_message["content"]) < 1000 and "larger than" in tool_message["content"]
    assert all(len(e.model_dump_json()) < 10_000 for e in history(runner))


@pytest.mark.parametrize(("size", "refused"), [(900, False), (1100, True)])
def test_the_cap_is_set_by_the_environment(size: int, refused: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RXLLM_MAX_TOOL_RESULT_BYTES", "1000")

    def fetch(url: str) -> str:
        """Fetch a page."""
        return "y" * size

    events, _, _ = run_with(fetch, [tool_call('{"url": "u"}'), answer("ok")])
    [response] = [r.response for n in events if n.kind == "N" for r in n.value.function_responses()]
    assert ("error" in response) is refused, response


@pytest.mark.parametrize("arguments", ['{"url": NaN}', '{"url": Infinity}', '{"url": [-Infinity]}', '{"url": }'],
                         ids=["nan", "infinity", "minus-infinity", "not-json"])
def test_non_finite_numbers_in_tool_arguments_are_malformed_and_never_reach_the_tool(arguments: str) -> None:
    calls: list[Any] = []

    def fetch(url: Any) -> str:
        """Fetch a page."""
        calls.append(url)
        return "page"

    events, bodies, _ = run_with(fetch, [tool_call(arguments), answer("unused")])
    assert calls == []
    errors = [n.exception for n in events if n.kind == "E"]
    finals = [n.value for n in events if n.kind == "N" and not n.value.partial]
    # the same outcome as arguments that are not JSON at all: a malformed call, no tool run
    assert errors or any(f.error_code for f in finals), (errors, finals)
    text = " ".join(str(e) for e in errors) + " ".join(str(f.error_message) for f in finals)
    assert "fetch" in text
    assert len(bodies) == 1 or all("NaN" not in json.dumps(b) and "Infinity" not in json.dumps(b) for b in bodies)
