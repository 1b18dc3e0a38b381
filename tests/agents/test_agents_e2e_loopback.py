"""The order-status worked example ("Where is order A17?") end to end over a real loopback SSE server
(OpenAI-compatible), and the example."""

from __future__ import annotations

import threading
import types
from typing import Any

import pytest

from rxllm.agents import Event, InMemoryRunner, LlmAgent, RunConfig, StreamingMode
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import Hold, StubServer

from .support import QUESTION, question


def recording_runner(base_url: str, calls: list[dict[str, Any]], example: types.ModuleType) -> InMemoryRunner:
    def get_order(order_id: str) -> dict[str, Any]:
        """Look an order up by its id.

        Args:
            order_id: The order's id, like "A17".
        """
        calls.append({"order_id": order_id})
        result: dict[str, Any] = example.get_order(order_id)
        return result

    model = OpenAiChatModel("gpt-stub", base_url=base_url, api_key="sk-test-not-real")
    agent = LlmAgent("support", model, instruction="You answer questions about orders.", tools=[get_order])
    runner = InMemoryRunner(agent, app_name="shop")
    runner.session_service.create_session("shop", "u1", session_id="s1").run()
    return runner


class Run:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.errors: list[Exception] = []
        self.done = threading.Event()

    def on_error(self, error: Exception) -> None:
        self.errors.append(error)
        self.done.set()


def test_worked_example_streams_live_and_stores_four_events(example: types.ModuleType) -> None:
    # The server sends the first event, then holds the rest until the subscriber has seen the first
    # partial (release is set only there). Partials held back until the body ended would deadlock
    # until the hold's 30 s timeout, and the 10 s wait below would fail.
    release = threading.Event()
    first = example.first_turn_events()
    body = [first[0], Hold(release, timeout=30.0), *first[1:]]
    calls: list[dict[str, Any]] = []
    first_seen: list[tuple[bool | None, str]] = []
    with StubServer(example.streamed_responses(body)) as server:
        runner = recording_runner(server.url + "/v1", calls, example)
        run = Run()

        def on_next(event: Event) -> None:
            if not release.is_set():
                first_seen.append((event.partial, event.text()))
                release.set()
            run.events.append(event)

        runner.run_async("u1", "s1", question(), RunConfig(streaming_mode=StreamingMode.SSE)).subscribe(
            on_next, run.on_error, run.done.set
        )
        assert run.done.wait(10), "the first partial did not reach the subscriber while the server held the rest"
        requests = [r.json() for r in server.requests]

    assert run.errors == []
    # What reached the subscriber while the server still held the rest of the stream: the first partial.
    assert first_seen == [(True, "Let me look ")]
    assert calls == [{"order_id": "A17"}]
    assert [(e.partial, e.text()) for e in run.events if e.partial] == [
        (True, "Let me look "),
        (True, "that up."),
        (True, "Order A17 "),
        (True, "shipped "),
        (True, "Tuesday."),
    ]
    history = runner.session_service.get_session("shop", "u1", "s1").run().events
    assert example.history_has_the_expected_shape(history)
    assert [e for e in run.events if not e.partial] == list(history[1:])
    # Two model calls; the second carries the stored history back to the provider.
    assert len(requests) == 2
    assert requests[0]["stream"] is True
    assert [m["role"] for m in requests[0]["messages"]] == ["system", "user"]
    assert requests[0]["messages"][1]["content"] == QUESTION
    assert [t["function"]["name"] for t in requests[0]["tools"]] == ["get_order"]
    assert requests[0]["tools"][0]["function"]["parameters"]["required"] == ["order_id"]
    roles = [m["role"] for m in requests[1]["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    assistant, tool = requests[1]["messages"][2:]
    assert assistant["content"] == "Let me look that up."
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_1"]
    assert tool["tool_call_id"] == "call_1"
    assert "shipped" in tool["content"]


def test_none_mode_over_the_server_gives_the_same_history(example: types.ModuleType) -> None:
    histories = []
    for mode, responses in (
        (StreamingMode.SSE, example.streamed_responses()),
        (StreamingMode.NONE, example.single_responses()),
    ):
        calls: list[dict[str, Any]] = []
        with StubServer(responses) as server:
            runner = recording_runner(server.url + "/v1", calls, example)
            run = Run()
            runner.run_async("u1", "s1", question(), RunConfig(streaming_mode=mode)).subscribe(
                run.events.append, run.on_error, run.done.set
            )
            assert run.done.wait(10)
            streamed = [r.json().get("stream") for r in server.requests]
        assert run.errors == [] and calls == [{"order_id": "A17"}]
        assert [bool(s) for s in streamed] == [mode is StreamingMode.SSE] * 2
        history = runner.session_service.get_session("shop", "u1", "s1").run().events
        histories.append([(e.author, e.content) for e in history])
    assert histories[0] == histories[1]


def test_disposing_mid_stream_closes_the_connection_and_runs_nothing_more(example: types.ModuleType) -> None:
    release = threading.Event()
    first = example.first_turn_events()
    body = [first[0], Hold(release, timeout=5.0), *first[1:]]
    calls: list[dict[str, Any]] = []
    got_partial = threading.Event()
    with StubServer(example.streamed_responses(body)) as server:
        runner = recording_runner(server.url + "/v1", calls, example)
        run = Run()

        def on_next(event: Event) -> None:
            run.events.append(event)
            got_partial.set()

        subscription = runner.run_async("u1", "s1", question(), RunConfig(streaming_mode=StreamingMode.SSE)).subscribe(
            on_next, run.on_error, run.done.set
        )
        assert got_partial.wait(5)
        connection = server.wait_for_connection(1, timeout=5)
        assert connection is not None

        subscription.dispose()

        assert connection.wait_closed_by_client(timeout=2.0), "disposal did not close the connection"
        release.set()
        assert len(server.requests) == 1
    assert calls == []
    assert [e.text() for e in run.events] == ["Let me look "]
    assert not run.done.is_set()
    history = runner.session_service.get_session("shop", "u1", "s1").run().events
    assert [e.text() for e in history] == [QUESTION]


@pytest.mark.parametrize("argv", [[], ["--mode", "none"]])
def test_example_main_returns_zero(
    example: types.ModuleType, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert example.main(argv) == 0
    out = capsys.readouterr().out
    assert "session history (4 events, 2 model calls)" in out
    assert out.rstrip().endswith("OK")
