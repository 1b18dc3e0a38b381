"""``share()``, ``switch_map`` and ``merge`` behave the same against ScriptedLlm and a real server.

Each scenario runs twice: against a timed :class:`~rxllm.testing.ScriptedLlm` on a
``TestScheduler``, and against ``OpenAiChatModel`` talking to a loopback :class:`StubServer`
(held with events instead of virtual time). Same calls, same items, same cancellations.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import reactivex
from reactivex import abc as rx_abc
from reactivex import operators as ops
from reactivex.subject import Subject
from reactivex.testing import TestScheduler

from rxllm import BaseLlm, Chunk, Content, LlmRequest, LlmResponse, Part
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import (
    Hold,
    ScriptedLlm,
    StubResponse,
    StubServer,
    assert_stream_protocol,
    at_times,
    scripted_turn,
    sse_turn,
)

TIMEOUT = 5.0


def _question(text: str) -> LlmRequest:
    return LlmRequest(contents=[Content(role="user", parts=[Part.from_text(text)])])


class Recorder:
    def __init__(self) -> None:
        self.items: list[LlmResponse] = []
        self.errors: list[Exception] = []
        self.completed = False
        self.done = threading.Event()
        self.first = threading.Event()

    def subscribe(self, source: reactivex.Observable[LlmResponse]) -> rx_abc.DisposableBase:
        return source.subscribe(self._on_next, self._on_error, self._on_completed)

    def _on_next(self, item: LlmResponse) -> None:
        self.items.append(item)
        self.first.set()

    def _on_error(self, error: Exception) -> None:
        self.errors.append(error)
        self.done.set()

    def _on_completed(self) -> None:
        self.completed = True
        self.done.set()

    def texts(self) -> list[str]:
        return [r.text() for r in self.items]


class Backend:
    """A model whose turns hold after ``before_hold`` text deltas until :meth:`finish`."""

    model: BaseLlm

    def wait_first_item(self, recorder: Recorder) -> None:
        raise NotImplementedError

    def finish(self, *recorders: Recorder) -> None:
        raise NotImplementedError

    def calls(self) -> int:
        raise NotImplementedError

    def cancelled(self, call: int) -> bool:
        raise NotImplementedError


class ScriptedBackend(Backend):
    def __init__(self, turns: list[tuple[list[str], int]]) -> None:
        self.clock = TestScheduler()
        timed = []
        for texts, before_hold in turns:
            turn = scripted_turn(*(Chunk(text_delta=t) for t in texts))
            times = [round(0.1 * (i + 1) + (0 if i < before_hold else 50.0), 9) for i in range(len(texts))]
            timed.append(at_times(turn, [*times, times[-1]]))
        self.llm = ScriptedLlm(timed, scheduler=self.clock)
        self.model = self.llm

    def wait_first_item(self, recorder: Recorder) -> None:
        self.clock.advance_to(self.clock.clock + 0.15)
        assert recorder.first.is_set()

    def finish(self, *recorders: Recorder) -> None:
        self.clock.advance_to(self.clock.clock + 100.0)
        assert all(r.done.is_set() for r in recorders)

    def calls(self) -> int:
        return len(self.llm.requests)

    def cancelled(self, call: int) -> bool:
        return self.llm.calls[call].cancelled


class ServerBackend(Backend):
    def __init__(self, turns: list[tuple[list[str], int]]) -> None:
        self.release = threading.Event()
        responses = []
        for texts, before_hold in turns:
            events = sse_turn("openai-chat", text=texts)  # events[0] opens the message
            cut = 1 + before_hold
            responses.append(StubResponse(body=[*events[:cut], Hold(self.release), *events[cut:]]))
        self.server = StubServer(responses).start()
        self.model = OpenAiChatModel("gpt-4o-mini", base_url=self.server.url + "/v1", api_key="sk-test")

    def wait_first_item(self, recorder: Recorder) -> None:
        assert recorder.first.wait(TIMEOUT)

    def finish(self, *recorders: Recorder) -> None:
        self.release.set()
        assert all(r.done.wait(TIMEOUT) for r in recorders)

    def calls(self) -> int:
        return len(self.server.requests)

    def cancelled(self, call: int) -> bool:
        request = self.server.requests[call]
        [connection] = [c for c in self.server.connections if any(r is request for r in c.requests)]
        return connection.wait_closed_by_client(TIMEOUT)

    def close(self) -> None:
        self.release.set()
        self.server.close()


@pytest.fixture(params=["scripted", "server"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def backends(kind: str) -> Iterator[list[Backend]]:
    made: list[Backend] = []
    yield made
    for backend in made:
        if isinstance(backend, ServerBackend):
            backend.close()


def _backend(kind: str, made: list[Backend], turns: list[tuple[list[str], int]]) -> Backend:
    backend: Backend = ScriptedBackend(turns) if kind == "scripted" else ServerBackend(turns)
    made.append(backend)
    return backend


def test_share_makes_one_call_and_both_subscribers_see_the_whole_turn(kind: str, backends: list[Backend]) -> None:
    backend = _backend(kind, backends, [(["one ", "two"], 0), (["spare"], 1)])
    shared = backend.model.generate_content(_question("q"), stream=True).pipe(ops.share())
    first, second = Recorder(), Recorder()
    first.subscribe(shared)
    second.subscribe(shared)
    backend.finish(first, second)
    assert first.texts() == second.texts() == ["one ", "two", "one two"]
    assert first.completed and second.completed
    assert backend.calls() == 1


def test_switch_map_cancels_the_answer_in_flight_for_the_next_question(kind: str, backends: list[Backend]) -> None:
    backend = _backend(kind, backends, [(["first ", "answer"], 1), (["second ", "answer"], 2)])
    questions: Subject[str] = Subject()
    recorder = Recorder()
    model = backend.model

    def ask(text: str) -> reactivex.Observable[LlmResponse]:
        return model.generate_content(_question(text), stream=True)

    recorder.subscribe(questions.pipe(ops.switch_map(ask)))
    questions.on_next("q1")
    backend.wait_first_item(recorder)
    questions.on_next("q2")
    assert backend.cancelled(0), "the first answer's call was not cancelled"
    questions.on_completed()
    backend.finish(recorder)
    assert recorder.texts() == ["first ", "second ", "answer", "second answer"]
    assert recorder.completed and backend.calls() == 2
    assert_stream_protocol(recorder.items[1:])


def test_merge_runs_two_calls_side_by_side_and_completes_after_both(kind: str, backends: list[Backend]) -> None:
    backend = _backend(kind, backends, [(["a1 ", "a2"], 1), (["b1 ", "b2"], 1)])
    recorder = Recorder()
    model = backend.model
    recorder.subscribe(
        reactivex.merge(
            model.generate_content(_question("a"), stream=True), model.generate_content(_question("b"), stream=True)
        )
    )
    backend.finish(recorder)
    assert recorder.completed and backend.calls() == 2
    by_turn: dict[str, list[Any]] = {"a": [], "b": []}
    for response in recorder.items:
        by_turn[response.text()[0]].append(response)
    for name, responses in by_turn.items():
        final = assert_stream_protocol(responses)
        assert final.text() == f"{name}1 {name}2"
