"""Lone surrogates from the wire: what a provider's JSON escapes can and cannot bring into a stored event.

The SSE parsers decode each event with ``pydantic_core.from_json``, which refuses a lone surrogate
escape (``"\\ud800"``) and joins a pair (``"\\ud83d\\ude00"``) into one character, so streamed text
can never hold one. A tool call's arguments are a JSON text inside that JSON, parsed by
``json.loads`` in the aggregator, which does turn a lone escape into a lone surrogate: the stored
event must still hold U+FFFD there, whatever fast path the store takes (a content built from the
wire is not clean by construction).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from reactivex import operators as ops

from rxllm import Content, HttpTransport, Part, ProtocolError, RetryPolicy
from rxllm.agents import InMemorySessionService, LlmAgent, RunConfig, Runner, StreamingMode
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import StubResponse, StubServer

SSE = RunConfig(streaming_mode=StreamingMode.SSE)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [choice]})


def _raw_text_chunk(escaped: str) -> str:
    """A chunk whose content is the JSON string literal ``escaped`` as it is written (escapes kept)."""
    return _chunk({"role": "assistant", "content": "PLACEHOLDER"}).replace('"PLACEHOLDER"', f'"{escaped}"')


@pytest.fixture
def transport() -> Iterator[HttpTransport]:
    created = HttpTransport(max_concurrent_streams=2)
    yield created
    created.close()


def _model(server: StubServer, transport: HttpTransport) -> OpenAiChatModel:
    return OpenAiChatModel("gpt-stub", base_url=server.url + "/v1", api_key="sk-test-not-real", transport=transport,
                           retry_policy=RetryPolicy.never())


def test_a_lone_surrogate_escape_in_streamed_text_is_refused_and_a_pair_is_one_character(
    transport: HttpTransport,
) -> None:
    pair = StubResponse.sse([_raw_text_chunk("\\ud83d\\ude00 ok"), _chunk({}, "stop"), "[DONE]"])
    lone = StubResponse.sse([_raw_text_chunk("caf\\udce9"), _chunk({}, "stop"), "[DONE]"])
    with StubServer([pair, lone]) as server:
        model = _model(server, transport)
        final = model.generate_content("hi", stream=True).pipe(ops.to_list()).run()[-1]
        with pytest.raises(ProtocolError):
            model.generate_content("hi", stream=True).pipe(ops.to_list()).run()
    assert final.text() == "\U0001f600 ok"


def lookup(q: str) -> dict[str, Any]:
    """Look ``q`` up."""
    return {"found": len(q)}


def test_a_lone_surrogate_escape_in_a_tool_calls_arguments_is_stored_as_a_replacement_character(
    transport: HttpTransport,
) -> None:
    arguments = '{"q": "x\\ud800"}'  # the arguments text holds a JSON escape of a lone surrogate
    assert json.loads(arguments) == {"q": "x\ud800"}  # what the aggregator's json.loads makes of it
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": arguments}}
    calls = StubResponse.sse([_chunk({"role": "assistant", "tool_calls": [call]}), _chunk({}, "tool_calls"), "[DONE]"])
    done = StubResponse.sse([_chunk({"role": "assistant", "content": "Found."}), _chunk({}, "stop"), "[DONE]"])
    sessions = InMemorySessionService()
    sessions.create_session("app", "u", session_id="s").run()
    with StubServer([calls, done]) as server:
        runner = Runner(LlmAgent("bot", _model(server, transport), tools=[lookup]), "app", sessions)
        message = Content(role="user", parts=(Part.from_text("find it"),))
        events = runner.run_async("u", "s", message, SSE).pipe(ops.to_list()).run()
        sent = server.requests[1].json()
    assert events[-1].text() == "Found."
    stored = sessions.get_session("app", "u", "s").run().events
    stored_calls = [call for event in stored for call in event.function_calls()]
    assert [call.args for call in stored_calls] == [{"q": "x\ufffd"}]
    sent_calls = [c for m in sent["messages"] if m["role"] == "assistant" for c in m.get("tool_calls", ())]
    assert [json.loads(c["function"]["arguments"]) for c in sent_calls] == [{"q": "x\ufffd"}]
