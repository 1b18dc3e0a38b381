"""The agent runtime under the same faults: no partial or truncated final is ever stored; no tool runs twice.

An ``LlmAgent`` with an ``OpenAiChatModel`` talks to a loopback server in SSE mode (on both
transports). Round 1
streams text and a ``get_weather`` call (its JSON arguments in pieces, with multi-byte text);
the tool counts its calls; round 2 streams the answer. The server dies at seeded-random offsets
of round 1 (inside the arguments too) and of round 2, with a reset or a clean FIN, chunked or
close-delimited, and also between the rounds (the second request gets no answer, or a 503).
Each run is checked against the session as stored afterwards:

* the stored events are a prefix of ``[user, round-1 final, tool response, round-2 final]``,
  each exactly the uncut one -- never a partial, never a final with text cut short or a call
  missing;
* the tool ran exactly once iff the round-1 final was stored, and never twice;
* the run either completed with the whole history or failed with an :class:`rxllm.RxLlmError`.

Half the runs use ``RetryPolicy.never()``, half a zero-delay retry policy (a cut before the first
partial is then retried against the next script entry: the tool must still run once).
"""

from __future__ import annotations

import random
import threading
from collections import Counter, deque
from collections.abc import Iterator
from typing import Any

import pytest
from faults_support import (
    MODES,
    TIMEOUT,
    TOOL_CALL,
    TRANSPORT_KINDS,
    FaultBody,
    cut_offsets,
    cut_response,
    fault_body,
    make_transport,
)

from rxllm import Content, Part, RetryPolicy, RxLlmError
from rxllm.agents import Event, InMemoryRunner, LlmAgent, RunConfig, StreamingMode
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import Disconnect, RecordedRequest, StubResponse, StubServer

SEED = 0xA6E7_5EED
ANSWER = ("Sonnig ", "in Köln, ", "21 °C ☀️.")
QUESTION = Content(role="user", parts=(Part.from_text("Wie ist das Wetter in Köln?"),))
WEATHER = {"city": "Köln", "forecast": "sunny", "celsius": 21}


class Script:
    """What the server answers: the next scripted response of the round the request belongs to.

    A request whose messages hold a tool result is round 2. A request with nothing left to answer
    gets a 500 and is counted (a run that asks more than it should fails the checks).
    """

    def __init__(self) -> None:
        self.rounds: dict[int, deque[StubResponse]] = {1: deque(), 2: deque()}
        self.requests: Counter[int] = Counter()
        self.unscripted = 0
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> StubResponse:
        number = 2 if any(m.get("role") == "tool" for m in request.json()["messages"]) else 1
        with self._lock:
            self.requests[number] += 1
            if self.rounds[number]:
                return self.rounds[number].popleft()
            self.unscripted += 1
        return StubResponse.json(500, {"error": {"message": f"nothing scripted for round {number}"}})

    def reset(self, round1: list[StubResponse], round2: list[StubResponse]) -> None:
        with self._lock:
            self.rounds = {1: deque(round1), 2: deque(round2)}
            self.requests = Counter()
            self.unscripted = 0


class World:
    """The server, the transport and a runner factory shared by every run of a test."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.script = Script()
        self.server = StubServer(responder=self.script).start()
        self.transport = make_transport(kind, streams=4)
        self.tool_calls: list[dict[str, Any]] = []
        self.round1 = fault_body("openai-chat")
        self.round2 = fault_body("openai-chat", text=ANSWER, tool_calls=())

    def runner(self, policy: RetryPolicy) -> InMemoryRunner:
        calls = self.tool_calls

        def get_weather(city: str, note: str = "", days: list[Any] | None = None) -> dict[str, Any]:
            """The weather in a city.

            Args:
                city: The city's name.
                note: A note.
                days: Which days.
            """
            calls.append({"city": city, "note": note, "days": days})
            return dict(WEATHER)

        model = OpenAiChatModel("gpt-stub", base_url=f"{self.server.url}/v1", api_key="sk-test-not-real",
                                transport=self.transport, retry_policy=policy)
        agent = LlmAgent("weather", model, instruction="Answer weather questions.", tools=[get_weather])
        runner = InMemoryRunner(agent, app_name="faults")
        runner.session_service.create_session("faults", "u1", session_id="s1").run()
        return runner

    def close(self) -> None:
        self.transport.close()
        self.server.close()


@pytest.fixture(scope="module", params=TRANSPORT_KINDS)
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    world = World(request.param)
    try:
        yield world
    finally:
        world.close()


class Run:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.errors: list[Exception] = []
        self.completed = False
        self.done = threading.Event()

    def on_error(self, error: Exception) -> None:
        self.errors.append(error)
        self.done.set()

    def on_completed(self) -> None:
        self.completed = True
        self.done.set()


def run_once(
    world: World, policy: RetryPolicy, round1: list[StubResponse], round2: list[StubResponse]
) -> tuple[Run, list[Event], int]:
    """One agent run against the scripted rounds; returns the run, the stored history and the tool's call count."""
    world.script.reset(round1, round2)
    world.tool_calls.clear()
    runner = world.runner(policy)
    run = Run()
    runner.run_async("u1", "s1", QUESTION, RunConfig(streaming_mode=StreamingMode.SSE)).subscribe(
        run.events.append, run.on_error, run.on_completed
    )
    assert run.done.wait(3 * TIMEOUT), "hang: the agent run did not terminate"
    history = list(runner.session_service.get_session("faults", "u1", "s1").run().events)
    return run, history, len(world.tool_calls)


def check(world: World, where: str, run: Run, history: list[Event], tool_runs: int) -> str:
    """Every invariant of the module docstring; returns how far the stored history got."""
    assert all(not e.partial for e in history), f"{where}: a partial was stored"
    assert history[0].author == "user" and history[0].content == QUESTION, where
    stored = history[1:]
    assert len(stored) <= 3, f"{where}: {len(stored)} stored events"
    full_text = "".join(("Grüße aus ", "Köln — ", "日本語で ", "天気 🌦️ ", "gleich."))
    if stored:
        first = stored[0]
        assert first.text() == full_text, f"{where}: round-1 final stored with text {first.text()!r}"
        assert [(c.name, c.args) for c in first.function_calls()] == [
            ("get_weather", TOOL_CALL.arguments)
        ], f"{where}: round-1 final stored with calls {first.function_calls()!r}"
        assert first.error_code is None, where
    if len(stored) >= 2:
        responses = stored[1].function_responses()
        assert [(r.name, r.response) for r in responses] == [("get_weather", WEATHER)], where
    if len(stored) == 3:
        assert stored[2].text() == "".join(ANSWER) and stored[2].is_final_response(), where
    assert tool_runs <= 1, f"{where}: the tool ran {tool_runs} times"
    assert tool_runs == (1 if len(stored) >= 2 else 0), f"{where}: tool runs {tool_runs}, stored {len(stored)}"
    assert len(stored) != 1, f"{where}: the round-1 final was stored but its tool response was not"
    if run.completed:
        assert len(stored) == 3, f"{where}: completed with {len(stored)} stored events"
        assert not run.errors
    else:
        (error,) = run.errors
        assert isinstance(error, RxLlmError), f"{where}: {type(error).__name__}: {error}"
        assert len(stored) in (0, 2), where
    rounds: list[str] = [""]  # what the subscriber saw: each round's partials are a prefix of its text
    for event in run.events:
        if event.partial:
            rounds[-1] += event.text()
        elif event.function_responses():
            rounds.append("")
    assert full_text.startswith(rounds[0]), f"{where}: round-1 partials {rounds[0]!r}"
    assert all("".join(ANSWER).startswith(seen) for seen in rounds[1:]), f"{where}: round-2 partials {rounds[1:]!r}"
    assert world.script.unscripted == 0, f"{where}: {world.script.unscripted} unexpected request(s)"
    return {0: "nothing", 2: "round 1 + tool", 3: "whole turn"}[len(stored)]


POLICIES = {"never": RetryPolicy.never(), "retry": RetryPolicy(max_attempts=3, base_delay=0.0)}


def offsets_for(body: FaultBody, rng: random.Random) -> list[int]:
    offsets = cut_offsets(body, rng)
    return sorted({*rng.sample(offsets, min(len(offsets), 16)), body.finish_at - 1, body.finish_at, len(body.body)})


def test_the_uncut_turn_stores_the_whole_history(world: World) -> None:
    run, history, tool_runs = run_once(world, POLICIES["never"], [StubResponse(body=world.round1.events)],
                                       [StubResponse(body=world.round2.events)])
    assert check(world, "uncut", run, history, tool_runs) == "whole turn"


@pytest.mark.parametrize("policy_name", sorted(POLICIES))
def test_round_1_cut_at_random_offsets(world: World, policy_name: str) -> None:
    policy = POLICIES[policy_name]
    rng = random.Random(SEED + len(policy_name))
    outcomes: Counter[str] = Counter()
    round1_offsets = offsets_for(world.round1, rng)
    args_offsets = rng.sample(world.round1.args_inside, 8)
    for offset in sorted(set(round1_offsets) | set(args_offsets)):
        for reset, chunked in MODES:
            where = f"round 1 cut at {offset}/{len(world.round1.body)} (reset={reset}, chunked={chunked}, " \
                    f"policy={policy_name}, seed={SEED:#x})"
            round1 = [cut_response(world.round1, offset, reset=reset, chunked=chunked)]
            if policy_name == "retry":  # a cut before the first partial is retried: give it a whole round 1
                round1.append(StubResponse(body=world.round1.events))
            run, history, tool_runs = run_once(world, policy, round1, [StubResponse(body=world.round2.events)])
            outcomes[check(world, where, run, history, tool_runs)] += 1
    assert outcomes["nothing"] > 0 and outcomes["whole turn"] > 0, outcomes
    print(f"\n{world.kind}, round 1 cuts ({policy_name}): {sum(outcomes.values())} runs: {dict(outcomes)}")


@pytest.mark.parametrize("policy_name", sorted(POLICIES))
def test_round_2_cut_at_random_offsets(world: World, policy_name: str) -> None:
    policy = POLICIES[policy_name]
    rng = random.Random(SEED * 3 + len(policy_name))
    outcomes: Counter[str] = Counter()
    for offset in offsets_for(world.round2, rng):
        for reset, chunked in MODES:
            where = f"round 2 cut at {offset}/{len(world.round2.body)} (reset={reset}, chunked={chunked}, " \
                    f"policy={policy_name})"
            round2 = [cut_response(world.round2, offset, reset=reset, chunked=chunked)]
            if policy_name == "retry":
                round2.append(StubResponse(body=world.round2.events))
            run, history, tool_runs = run_once(world, policy, [StubResponse(body=world.round1.events)], round2)
            outcomes[check(world, where, run, history, tool_runs)] += 1
            assert tool_runs == 1, f"{where}: the tool ran {tool_runs} times"
    assert outcomes["round 1 + tool"] > 0 and outcomes["whole turn"] > 0, outcomes
    print(f"\n{world.kind}, round 2 cuts ({policy_name}): {sum(outcomes.values())} runs: {dict(outcomes)}")


@pytest.mark.parametrize("policy_name", sorted(POLICIES))
@pytest.mark.parametrize(
    "fault",
    [
        StubResponse(before_headers=[Disconnect(reset=True)]),
        StubResponse(before_headers=[Disconnect(reset=False)]),
        StubResponse.json(503, {"error": {"message": "overloaded"}}),
        StubResponse(body=[Disconnect(reset=True)]),
    ],
    ids=["reset-before-headers", "fin-before-headers", "503", "reset-after-headers"],
)
def test_the_server_dies_between_the_rounds(world: World, policy_name: str, fault: StubResponse) -> None:
    policy = POLICIES[policy_name]
    round2 = [fault, StubResponse(body=world.round2.events)]
    run, history, tool_runs = run_once(world, policy, [StubResponse(body=world.round1.events)], round2)
    where = f"between rounds: {fault} (policy={policy_name})"
    outcome = check(world, where, run, history, tool_runs)
    assert tool_runs == 1
    if policy_name == "retry":
        assert outcome == "whole turn", f"{where}: the retry did not recover: {run.errors!r}"
    else:
        assert outcome == "round 1 + tool" and world.script.requests == {1: 1, 2: 1}, where
