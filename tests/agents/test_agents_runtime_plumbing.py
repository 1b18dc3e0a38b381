"""The runtime's plumbing: a run subscribed with a scheduler does not hop onto it (``Observable.run()``
subscribes with a ``NewThreadScheduler``: a hop per step would start a thread per model call and tool)."""

from __future__ import annotations

import threading
from typing import Any

import reactivex
from reactivex import operators as ops
from reactivex.scheduler import ImmediateScheduler
from virtual_clock import CountingScheduler

from rxllm import Chunk, Content, Part
from rxllm.agents import Event, InMemoryRunner, LlmAgent, RunConfig, SequentialAgent, StreamingMode
from rxllm.testing import ScriptedLlm, scripted_turn

from .support import ANSWER, APP, SESSION, USER, history, order_runner, question, worked_example_model


def test_a_run_subscribed_with_a_scheduler_never_schedules_on_it() -> None:
    model = worked_example_model()
    model._scheduler = ImmediateScheduler()  # the model emits on the subscribing thread
    runner, calls = order_runner(model)
    subscriber_scheduler = CountingScheduler()
    events: list[Any] = []
    done = threading.Event()
    runner.run_async(USER, SESSION, question(), RunConfig(streaming_mode=StreamingMode.SSE)).subscribe(
        events.append, lambda e: done.set(), done.set, scheduler=subscriber_scheduler
    )
    assert done.wait(5)
    assert events[-1].text() == ANSWER and calls == [{"order_id": "A17"}]
    assert [e.partial for e in history(runner)] == [None, None, None, None]  # user, call, response, answer
    assert subscriber_scheduler.scheduled == 0


def test_run_with_observable_run_starts_no_thread_per_step() -> None:
    model = ScriptedLlm(
        [scripted_turn(Chunk(text_delta="one")), scripted_turn(Chunk(text_delta="two"))], scheduler=ImmediateScheduler()
    )
    pipeline = SequentialAgent("both", sub_agents=[LlmAgent("a", model), LlmAgent("b", model)])
    runner = InMemoryRunner(pipeline, app_name=APP)
    runner.session_service.create_session(APP, USER, session_id=SESSION).run()
    threads: set[int] = set()

    def note(_: object) -> None:
        threads.add(threading.get_ident())

    texts = (
        runner.run_async(USER, SESSION, question())
        .pipe(ops.do_action(on_next=note), ops.map(lambda e: e.text()), ops.to_list())
        .run()  # subscribes with reactivex's NewThreadScheduler
    )
    assert texts == ["one", "two"]
    assert len(threads) == 1  # both agents' events on one thread: no new thread per sub-agent


def test_event_and_invocation_ids_are_distinct_uuid4_strings() -> None:
    import uuid

    from rxllm._tools import new_invocation_id
    from rxllm.agents import Event

    ids = [Event(author="bot").id for _ in range(2000)] + [new_invocation_id()[2:] for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for value in ids[:50] + ids[-50:]:
        parsed = uuid.UUID(value)
        assert (parsed.version, parsed.variant, str(parsed)) == (4, uuid.RFC_4122, value)
    assert new_invocation_id().startswith("e-")



class _EmittingLlmAgent(LlmAgent):
    """Replaces the flow with one event it only emits (as a custom agent ported from Java)."""

    def _run_async_impl(self, ctx: Any) -> Any:
        content = Content(role="model", parts=(Part.from_text("emitted, not stored by me"),))
        return reactivex.of(Event(invocation_id=ctx.invocation_id, author=self.name, content=content))


def test_an_llm_agent_subclass_with_its_own_run_still_has_the_events_it_only_emits_stored() -> None:
    # LlmAgent's own flow stores every event before emitting it (run_async checks nothing then);
    # a subclass that replaces the run and only emits still gets its events stored
    runner = InMemoryRunner(_EmittingLlmAgent("custom", ScriptedLlm([])), app_name=APP)
    runner.session_service.create_session(APP, USER, session_id=SESSION).run()
    events = runner.run_async(USER, SESSION, question()).pipe(ops.to_list()).run()
    assert [e.text() for e in events] == ["emitted, not stored by me"]
    stored = history(runner)
    assert [(e.author, e.text()) for e in stored] == [("user", question().parts[0].text), ("custom", events[0].text())]
    assert stored[-1].id == events[0].id
