"""Multi-agent runs: the history each model sees (ADK's Contents.java), and the workflow agents."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import reactivex
from reactivex import operators as ops
from reactivex.scheduler import NewThreadScheduler

from rxllm import BaseLlm, Chunk, Content, FunctionCall, FunctionResponse, LlmRequest, LlmResponse, Part
from rxllm.agents import (
    BaseAgent,
    Event,
    EventActions,
    InMemoryRunner,
    LlmAgent,
    LoopAgent,
    ParallelAgent,
    RunConfig,
    SequentialAgent,
    StreamingMode,
    ToolContext,
)
from rxllm.agents._flows.contents import event_belongs_to_branch, request_contents
from rxllm.testing import ScriptedLlm, scripted_turn

from .support import user_message

MODES = [StreamingMode.NONE, StreamingMode.SSE]


def text_turn(*pieces: str) -> list[LlmResponse]:
    return scripted_turn(*(Chunk(text_delta=p) for p in pieces))


def said(author: str, text: str, **fields: Any) -> Event:
    role = "user" if author == "user" else "model"
    return Event(author=author, content=Content(role=role, parts=(Part.from_text(text),)), **fields)


def texts(content: Content) -> list[str | None]:
    return [p.text for p in content.parts]


def run(
    runner: InMemoryRunner, text: str, mode: StreamingMode = StreamingMode.NONE, session: str = "s1"
) -> list[Event]:
    if runner.session_service.get_session(runner.app_name, "u1", session).pipe(ops.to_list()).run() == []:
        runner.session_service.create_session(runner.app_name, "u1", session_id=session).run()
    events: list[Event] = (
        runner.run_async("u1", session, user_message(text), RunConfig(streaming_mode=mode)).pipe(ops.to_list()).run()
    )
    return events


# ---- history rules ---------------------------------------------------------------------------


def test_other_agents_text_calls_and_results_become_user_context() -> None:
    call = Event(
        author="writer",
        content=Content(
            role="model",
            parts=(
                Part(text="thinking...", thought=True),
                Part.from_text("Let me look."),
                Part(function_call=FunctionCall(id="c1", name="lookup", args={"q": "pond"})),
            ),
        ),
    )
    response = Event(
        author="writer",
        content=Content(
            role="user", parts=(Part(function_response=FunctionResponse(id="c1", name="lookup", response={"hit": 1})),)
        ),
    )
    contents = request_contents([said("user", "Go"), call, response], agent_name="reviewer", branch=None)
    assert [c.role for c in contents] == ["user", "user", "user"]
    assert texts(contents[1]) == [
        "For context:",
        "[writer] said: Let me look.",
        '[writer] called tool `lookup` with parameters: {"q":"pond"}',
    ]
    assert texts(contents[2]) == ["For context:", '[writer] `lookup` tool returned result: {"hit":1}']


def test_own_events_stay_model_turns_and_partials_never_enter() -> None:
    history = [said("user", "Hi"), said("bot", "Hel", partial=True), said("bot", "Hello")]
    contents = request_contents(history, agent_name="bot", branch=None)
    assert [(c.role, texts(c)) for c in contents] == [("user", ["Hi"]), ("model", ["Hello"])]


@pytest.mark.parametrize(
    ("branch", "event_branch", "visible"),
    [
        (None, "fan.a", True),
        ("fan.a", None, True),
        ("fan.a", "fan.a", True),
        ("fan.a.x", "fan.a", True),
        ("fan.a", "fan.b", False),
        ("fan.a", "fan.a.x", False),
        ("root.agent_10", "root.agent_1", False),
    ],
)
def test_branch_visibility(branch: str | None, event_branch: str | None, visible: bool) -> None:
    assert event_belongs_to_branch(branch, said("a", "x", branch=event_branch)) is visible


def test_rewound_invocations_are_left_out() -> None:
    history = [
        said("user", "one", invocation_id="i1"),
        said("bot", "first", invocation_id="i1"),
        said("user", "two", invocation_id="i2"),
        said("bot", "second", invocation_id="i2"),
        Event(author="user", invocation_id="i3", actions=EventActions(rewind_before_invocation_id="i2")),
        said("user", "three", invocation_id="i4"),
    ]
    contents = request_contents(history, agent_name="bot", branch=None)
    assert [texts(c) for c in contents] == [["one"], ["first"], ["three"]]


def test_calls_of_an_ended_invocation_without_answer_are_dropped_long_running_kept() -> None:
    dangling = Event(
        author="bot",
        content=Content(
            role="model",
            parts=(Part.from_text("Checking."), Part(function_call=FunctionCall(id="c1", name="slow", args={}))),
        ),
    )
    only_call = Event(
        author="bot", content=Content(role="model", parts=(Part(function_call=FunctionCall(id="c2", name="slow")),))
    )
    waiting = Event(
        author="bot",
        long_running_tool_ids=("c3",),
        content=Content(role="model", parts=(Part(function_call=FunctionCall(id="c3", name="approve")),)),
    )
    contents = request_contents([said("user", "Go"), dangling, only_call, waiting], agent_name="bot", branch=None)
    assert [texts(c) for c in contents] == [["Go"], ["Checking."], [None]]
    assert contents[2].parts[0].function_call is not None and contents[2].parts[0].function_call.id == "c3"


def test_include_contents_none_keeps_the_current_turn_only() -> None:
    history = [said("user", "old"), said("bot", "old answer"), said("user", "new")]
    contents = request_contents(history, agent_name="bot", branch=None, include_contents="none")
    assert [texts(c) for c in contents] == [["new"]]


def test_a_late_function_response_is_moved_next_to_its_call() -> None:
    call = Event(
        author="bot",
        long_running_tool_ids=("c1",),
        content=Content(role="model", parts=(Part(function_call=FunctionCall(id="c1", name="approve")),)),
    )
    pending = Event(
        author="bot",
        content=Content(
            role="user",
            parts=(Part(function_response=FunctionResponse(id="c1", name="approve", response={"status": "pending"})),),
        ),
    )
    answer = Event(
        author="user",
        content=Content(
            role="user",
            parts=(Part(function_response=FunctionResponse(id="c1", name="approve", response={"status": "approved"})),),
        ),
    )
    contents = request_contents(
        [said("user", "Go"), call, pending, said("bot", "Waiting."), answer], agent_name="bot", branch=None
    )
    assert len(contents) == 3
    last = contents[2].parts
    assert len(last) == 1 and last[0].function_response is not None
    assert last[0].function_response.response == {"status": "approved"}


# ---- agent tree ------------------------------------------------------------------------------


def test_agent_tree_navigation_and_misuse() -> None:
    a, b = LlmAgent("a", ScriptedLlm([])), LlmAgent("b", ScriptedLlm([]))
    root = SequentialAgent("root", sub_agents=[a, b], description="does things")
    assert a.parent_agent is root and root.sub_agents == (a, b) and root.description == "does things"
    assert root.find_agent("b") is b and root.find_agent("root") is root and root.find_agent("c") is None
    with pytest.raises(ValueError, match="already has the parent"):
        SequentialAgent("other", sub_agents=[a])
    with pytest.raises(ValueError, match="two agents named 'x'"):
        SequentialAgent("top", sub_agents=[LlmAgent("x", ScriptedLlm([])), LlmAgent("x", ScriptedLlm([]))])


# ---- sequential -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_reviewer_sees_the_writers_reply_as_user_context(mode: StreamingMode) -> None:
    writer_model = ScriptedLlm([text_turn("Roses ", "are red.")])
    reviewer_model = ScriptedLlm([text_turn("Lovely.")])
    writer = LlmAgent("writer", writer_model, instruction="Write.")
    reviewer = LlmAgent("reviewer", reviewer_model, instruction="Review.")
    runner = InMemoryRunner(SequentialAgent("pipeline", sub_agents=[writer, reviewer]))
    events = run(runner, "A poem about roses", mode)
    assert [(e.author, e.text()) for e in events if not e.partial] == [
        ("writer", "Roses are red."),
        ("reviewer", "Lovely."),
    ]
    request, _ = reviewer_model.requests[0]
    assert [(c.role, texts(c)) for c in request.contents] == [
        ("user", ["A poem about roses"]),
        ("user", ["For context:", "[writer] said: Roses are red."]),
    ]
    assert {e.invocation_id for e in events} == {events[0].invocation_id}


# ---- parallel ---------------------------------------------------------------------------------


class ThreadedLlm(BaseLlm):
    """A scripted model answering on a new thread after ``gate`` opens, so branches overlap."""

    def __init__(self, text: str, gate: threading.Barrier | None) -> None:
        super().__init__(model="threaded")
        self._text = text
        self._gate = gate
        self.requests: list[LlmRequest] = []

    def generate_content(self, llm_request: LlmRequest, stream: bool = False) -> reactivex.Observable[LlmResponse]:
        self.requests.append(llm_request)
        gate = self._gate

        def answer() -> LlmResponse:
            if gate is not None:
                gate.wait(5)
            return LlmResponse(content=Content(role="model", parts=(Part.from_text(self._text),)))

        return reactivex.from_callable(answer, NewThreadScheduler())


@pytest.mark.parametrize("repeat", range(50))
def test_parallel_branches_never_see_each_other(repeat: int) -> None:
    gate = threading.Barrier(2)
    models = {name: ThreadedLlm(f"{name} found things", gate) for name in ("a", "b")}
    follow = ScriptedLlm([text_turn("Summary.")])
    fan = ParallelAgent("fan", sub_agents=[LlmAgent(n, m) for n, m in models.items()])
    runner = InMemoryRunner(SequentialAgent("research", sub_agents=[fan, LlmAgent("summary", follow)]))
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
    events = runner.run_async("u1", "s1", user_message("Research ponds")).pipe(ops.to_list()).run()
    assert sorted((e.author, e.branch) for e in events) == [("a", "fan.a"), ("b", "fan.b"), ("summary", None)]
    for name, model in models.items():
        seen = [t for c in model.requests[0].contents for t in texts(c)]
        assert seen == ["Research ponds"], f"branch {name} saw {seen}"
    summary_seen = [t for c in follow.requests[0][0].contents for t in texts(c)]
    assert "[a] said: a found things" in summary_seen and "[b] said: b found things" in summary_seen


def test_parallel_events_interleave_as_they_happen() -> None:
    release_b = threading.Event()
    order: list[str] = []

    class Gated(BaseLlm):
        def __init__(self, name: str, wait_for: threading.Event | None, then: threading.Event | None) -> None:
            super().__init__(model=name)
            self._wait_for, self._then = wait_for, then

        def generate_content(self, llm_request: LlmRequest, stream: bool = False) -> reactivex.Observable[LlmResponse]:
            def answer() -> LlmResponse:
                if self._wait_for is not None:
                    assert self._wait_for.wait(5)
                return LlmResponse(content=Content(role="model", parts=(Part.from_text(self.model),)))

            return reactivex.from_callable(answer, NewThreadScheduler())

    # a waits for b's event to have been emitted: a's event can only come second
    fan = ParallelAgent(
        "fan", sub_agents=[LlmAgent("a", Gated("a", release_b, None)), LlmAgent("b", Gated("b", None, None))]
    )
    runner = InMemoryRunner(fan)
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
    done = threading.Event()

    def on_next(event: Event) -> None:
        order.append(event.author)
        release_b.set()

    runner.run_async("u1", "s1", user_message("go")).subscribe(on_next, on_completed=done.set)
    assert done.wait(5)
    assert order == ["b", "a"]


# ---- loop -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_loop_stops_at_max_iterations(mode: StreamingMode) -> None:
    critic = ScriptedLlm([text_turn(f"round {n}") for n in range(1, 4)])
    runner = InMemoryRunner(LoopAgent("refine", sub_agents=[LlmAgent("critic", critic)], max_iterations=3))
    events = [e for e in run(runner, "Improve it", mode) if not e.partial]
    assert [e.text() for e in events] == ["round 1", "round 2", "round 3"]
    assert len(critic.requests) == 3


@pytest.mark.parametrize("mode", MODES)
def test_loop_stops_on_escalate(mode: StreamingMode) -> None:
    def exit_loop(tool_context: ToolContext) -> dict[str, str]:
        """Stop refining."""
        tool_context.actions.escalate = True
        return {"done": "yes"}

    from rxllm import ToolCallFragment

    def call_exit() -> list[LlmResponse]:
        return scripted_turn(Chunk(tool_call_fragments=(ToolCallFragment(0, "call_x", "exit_loop", "{}"),)))

    writer = ScriptedLlm([text_turn("draft 1"), text_turn("draft 2"), text_turn("never")])
    critic = ScriptedLlm([text_turn("needs work"), call_exit(), text_turn("never")])
    loop = LoopAgent(
        "refine",
        sub_agents=[LlmAgent("writer", writer), LlmAgent("critic", critic, tools=[exit_loop])],
        max_iterations=10,
    )
    events = [e for e in run(InMemoryRunner(loop), "Write", mode) if not e.partial]
    assert [(e.author, e.text(), bool(e.actions.escalate)) for e in events] == [
        ("writer", "draft 1", False),
        ("critic", "needs work", False),
        ("writer", "draft 2", False),
        ("critic", "", False),
        ("critic", "", True),
    ]
    assert len(critic.requests) == 2 and len(writer.requests) == 2


def test_custom_base_agent_runs_under_the_runner() -> None:
    class Greeter(BaseAgent):
        def _run_async_impl(self, ctx: Any) -> reactivex.Observable[Event]:
            event = Event(
                invocation_id=ctx.invocation_id,
                author=self.name,
                branch=ctx.branch,
                content=Content(role="model", parts=(Part.from_text("hello"),)),
            )
            return ctx.append_event(event)  # type: ignore[no-any-return]

    runner = InMemoryRunner(SequentialAgent("seq", sub_agents=[Greeter("greeter")]))
    assert [e.text() for e in run(runner, "hi")] == ["hello"]


# ---- parallel disposal over real connections ------------------------------------------------


def test_disposing_a_parallel_run_closes_every_branchs_connection() -> None:
    from rxllm.providers.openai import OpenAiChatModel
    from rxllm.testing import Hold, StubResponse, StubServer, sse_turn

    release = threading.Event()
    turn = sse_turn("openai-chat", text=["Half ", "an answer"])
    held = StubResponse(body=(*turn[:2], Hold(release, timeout=10.0), *turn[2:]))
    partials = {"a": threading.Event(), "b": threading.Event()}
    with StubServer([held, held]) as server:
        model = OpenAiChatModel("gpt-stub", base_url=server.url + "/v1", api_key="sk-test-not-real")
        fan = ParallelAgent("fan", sub_agents=[LlmAgent("a", model), LlmAgent("b", model)])
        runner = InMemoryRunner(fan)
        runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
        done = threading.Event()

        def on_next(event: Event) -> None:
            partials[event.author].set()

        subscription = runner.run_async(
            "u1", "s1", user_message("go"), RunConfig(streaming_mode=StreamingMode.SSE)
        ).subscribe(on_next, lambda e: done.set(), done.set)
        assert partials["a"].wait(5) and partials["b"].wait(5), "both branches stream at the same time"
        assert server.wait_for_connection(2, timeout=5) is not None
        connections = server.connections[:2]

        subscription.dispose()

        for connection in connections:
            assert connection.wait_closed_by_client(timeout=2.0), "a branch's connection stayed open"
        release.set()
    assert not done.is_set()
    history = runner.session_service.get_session(runner.app_name, "u1", "s1").run().events
    assert [e.author for e in history] == ["user"]
