"""Events compaction, as ADK Java's ``EventsCompactionConfig`` / ``SlidingWindowEventCompactor`` /
``TailRetentionEventCompactor`` / ``LlmEventSummarizer`` and ``Contents.processCompactionEvent``:
old events summarised into one compaction event that requests show instead of them, the stored
events kept."""

from __future__ import annotations

from typing import Any

import pytest
import reactivex
from reactivex import operators as ops
from reactivex.scheduler import ImmediateScheduler

from rxllm import Chunk, ConfigurationError, Content, FunctionCall, FunctionResponse, Part, UsageMetadata
from rxllm.agents import (
    Event,
    EventActions,
    EventCompaction,
    EventsCompactionConfig,
    InMemoryRunner,
    LlmAgent,
    LlmEventSummarizer,
    SequentialAgent,
    SlidingWindowEventCompactor,
    TailRetentionEventCompactor,
)
from rxllm.agents._flows.contents import request_contents
from rxllm.testing import ScriptedLlm, scripted_turn


def said(author: str, text: str, timestamp: float, invocation: str = "") -> Event:
    role = "user" if author == "user" else "model"
    return Event(author=author, invocation_id=invocation, timestamp=timestamp,
                 content=Content(role=role, parts=(Part.from_text(text),)))


def compaction(start: float, end: float, summary: str, timestamp: float) -> Event:
    content = Content(role="model", parts=(Part.from_text(summary),))
    return Event(author="user", invocation_id="c", timestamp=timestamp, actions=EventActions(
        compaction=EventCompaction(start_timestamp=start, end_timestamp=end, compacted_content=content)))


def texts(contents: tuple[Content, ...]) -> list[tuple[str | None, str]]:
    return [(c.role, c.text()) for c in contents]


class Recorder(LlmEventSummarizer):
    """Summarises into ``"summary of <first text> .. <last text>"`` and records what it was given."""

    def __init__(self) -> None:
        super().__init__(ScriptedLlm([]))
        self.given: list[list[Event]] = []

    def summarize_events(self, events: Any) -> Any:
        self.given.append(list(events))
        first, last = events[0].text(), events[-1].text()
        content = Content(role="model", parts=(Part.from_text(f"summary of {first} .. {last}"),))
        return reactivex.just(Event(author="user", invocation_id=Event.new_id(), actions=EventActions(
            compaction=EventCompaction(start_timestamp=events[0].timestamp, end_timestamp=events[-1].timestamp,
                                       compacted_content=content))))


def test_the_sliding_window_compacts_every_interval_invocations_with_the_overlap_adk_javas_example() -> None:
    compactor = SlidingWindowEventCompactor(EventsCompactionConfig(2, 1, summarizer=Recorder()))
    events: list[Event] = []
    clock = iter(range(1, 100))
    windows = []
    for n in range(1, 5):
        events += [said("user", f"q{n}", next(clock), f"i{n}"), said("bot", f"a{n}", next(clock), f"i{n}")]
        window = compactor.events_to_compact(events)
        windows.append([e.invocation_id for e in window])
        if window:
            events.append(compaction(window[0].timestamp, window[-1].timestamp, "s", next(clock)))
    assert windows == [[], ["i1", "i1", "i2", "i2"], [], ["i2", "i2", "i3", "i3", "i4", "i4"]]


def test_requests_show_each_summary_in_place_of_the_events_it_covers_sliding_window_case() -> None:
    events = [said("user", "e1", 1), said("bot", "e2", 2), compaction(1, 2, "s12", 3), said("user", "e3", 4),
              compaction(2, 4, "s23", 5), said("bot", "e4", 6)]
    assert texts(request_contents(events, agent_name="bot", branch=None)) == [
        ("model", "s12"), ("model", "s23"), ("model", "e4")
    ]


def test_a_summary_covered_by_a_later_one_is_dropped_rolling_summary_case() -> None:
    events = [said("user", "e1", 1), said("bot", "e2", 2), said("user", "e3", 3), said("bot", "e4", 4),
              compaction(1, 1, "s1", 5), said("user", "e6", 6), said("bot", "e7", 7), compaction(1, 3, "s13", 8),
              said("user", "e9", 9)]
    assert texts(request_contents(events, agent_name="bot", branch=None)) == [
        ("model", "s13"), ("model", "e4"), ("user", "e6"), ("model", "e7"), ("user", "e9")
    ]


def test_the_llm_summarizer_asks_once_with_adk_javas_prompt_and_returns_a_compaction_event() -> None:
    model = ScriptedLlm([scripted_turn(Chunk(text_delta="They asked about A17; it shipped."))])
    events = [
        said("user", "Where is A17?", 10.0, "i1"),
        Event(author="bot", invocation_id="i1", timestamp=11.0, content=Content(role="model", parts=(
            Part(function_call=FunctionCall(id="c1", name="get_order", args={"id": "A17"})),))),
        Event(author="bot", invocation_id="i1", timestamp=12.0, content=Content(role="user", parts=(
            Part(function_response=FunctionResponse(id="c1", name="get_order", response={"status": "shipped"})),))),
        said("bot", "It shipped.", 13.0, "i1"),
    ]

    (event,) = LlmEventSummarizer(model).summarize_events(events).pipe(ops.to_list()).run()

    request, stream = model.requests[0]
    assert stream is False
    (prompt,) = request.contents
    assert prompt.role == "user"
    assert prompt.text() == LlmEventSummarizer.DEFAULT_PROMPT_TEMPLATE.replace(
        "{conversation_history}",
        'user: Where is A17?\nmodel: [FUNCTION_CALL: get_order({"id":"A17"})]\n'
        'user: [FUNCTION_RESPONSE: get_order -> {"status":"shipped"}]\nmodel: It shipped.',
    )
    assert event.author == "user" and event.content is None
    assert event.actions.compaction == EventCompaction(
        start_timestamp=10.0, end_timestamp=13.0,
        compacted_content=Content(role="model", parts=(Part.from_text("They asked about A17; it shipped."),)),
    )
    assert EventActions.from_json(event.actions.to_json()) == event.actions
    assert '"compaction":{"startTimestamp":10.0,"endTimestamp":13.0,"compactedContent":' in event.actions.to_json()


def test_a_500_turn_sessions_requests_stay_bounded_and_every_event_stays_stored() -> None:
    turns, interval, overlap = 500, 10, 2
    model = ScriptedLlm([scripted_turn(Chunk(text_delta=f"answer {n}")) for n in range(turns)],
                        scheduler=ImmediateScheduler())
    summaries = ScriptedLlm([scripted_turn(Chunk(text_delta=f"summary {n}")) for n in range(turns // interval)],
                            scheduler=ImmediateScheduler())
    config = EventsCompactionConfig(interval, overlap, summarizer=LlmEventSummarizer(summaries))
    runner = InMemoryRunner(LlmAgent("bot", model), events_compaction_config=config)
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()

    for n in range(turns):
        runner.run_async("u1", "s1", f"question {n}").pipe(ops.to_list()).run()

    sizes = [len(request.contents) for request, _ in model.requests]
    compactions = turns // interval
    # raw events: at most interval + overlap invocations (two events each) after the summaries, plus the new message;
    # the summaries: one per compaction (ADK's sliding window keeps every summary no later one covers)
    assert max(sizes) <= 2 * (interval + overlap) + 1 + compactions
    assert sizes[-1] <= 2 * (interval + overlap) + 1 + compactions - 1
    assert max(sizes[-100:]) - min(sizes[-100:]) <= 2 * (interval + overlap) + 100 // interval
    assert len(summaries.requests) == compactions
    last = model.requests[-1][0].contents
    assert last[-1].text() == f"question {turns - 1}"
    shown = [c.text() for c in last if c.text().startswith("summary")]
    assert shown == [f"summary {n}" for n in range(compactions - 1)]
    stored = runner.session_service.get_session(runner.app_name, "u1", "s1").run().events
    assert len(stored) == 2 * turns + compactions
    assert [e.text() for e in stored if e.author == "user" and e.content is not None] == [
        f"question {n}" for n in range(turns)
    ]


def test_without_a_summarizer_the_root_agents_model_summarises() -> None:
    model = ScriptedLlm([scripted_turn(Chunk(text_delta="Hi.")), scripted_turn(Chunk(text_delta="Greeted once."))])
    runner = InMemoryRunner(LlmAgent("bot", model), events_compaction_config=EventsCompactionConfig(1, 0))
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()

    runner.run_async("u1", "s1", "Hello").pipe(ops.to_list()).run()

    stored = runner.session_service.get_session(runner.app_name, "u1", "s1").run().events
    assert stored[-1].actions.compaction is not None
    assert stored[-1].actions.compaction.compacted_content.text() == "Greeted once."
    assert model.requests[1][0].contents[0].text().startswith("The following is a conversation history")


def test_compaction_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="compaction_interval"):
        EventsCompactionConfig(0, 1)
    with pytest.raises(ConfigurationError, match="overlap_size"):
        EventsCompactionConfig(2, -1)
    workflow = SequentialAgent("steps", sub_agents=[LlmAgent("bot", ScriptedLlm([]))])
    with pytest.raises(ConfigurationError, match="summarizer"):
        InMemoryRunner(workflow, events_compaction_config=EventsCompactionConfig(2, 1))


# ---- tail retention (ADK Java's Compaction request processor): a rolling summary and a tail ------


class Numbered(Recorder):
    """Summarises into ``"summary <n>"`` (a summary of constant size) and records what it was given."""

    def summarize_events(self, events: Any) -> Any:
        self.given.append(list(events))
        content = Content(role="model", parts=(Part.from_text(f"summary {len(self.given)}"),))
        return reactivex.just(Event(author="user", invocation_id=Event.new_id(), actions=EventActions(
            compaction=EventCompaction(start_timestamp=events[0].timestamp, end_timestamp=events[-1].timestamp,
                                       compacted_content=content))))


def test_tail_retention_summarises_all_but_the_tail_with_the_latest_summary_in_front() -> None:
    recorder = Recorder()
    compactor = TailRetentionEventCompactor(recorder, retention_size=2, token_threshold=3)
    events = [said("user", "q1 long enough", 1), said("bot", "a1 long enough", 2),
              compaction(1, 2, "S12", 3), said("user", "q2 long enough", 4), said("bot", "a2 long enough", 5),
              said("user", "q3 long enough", 6)]
    picked = compactor.events_to_compact(events)
    # the latest summary, as an event at its start time, then the events after its end, less the tail
    assert [(e.text(), e.timestamp) for e in picked] == [("S12", 1), ("q2 long enough", 4)]
    # within the threshold (a quarter of the text's length), or no more events than the tail: nothing
    assert TailRetentionEventCompactor(recorder, retention_size=2, token_threshold=1000).events_to_compact(events) == []
    assert TailRetentionEventCompactor(recorder, retention_size=4, token_threshold=3).events_to_compact(events) == []


def test_tail_retention_trusts_the_latest_prompt_token_count_over_the_estimate() -> None:
    recorder = Recorder()
    compactor = TailRetentionEventCompactor(recorder, retention_size=1, token_threshold=100)
    short = [said("user", "hi", 1), said("bot", "hello", 2), said("user", "again", 3)]
    counted = short[1].model_copy(update={"usage_metadata": UsageMetadata(prompt_token_count=101)})
    assert compactor.events_to_compact(short) == []  # estimated: a few tokens
    assert [e.text() for e in compactor.events_to_compact([short[0], counted, short[2]])] == ["hi", "hello"]


def test_a_500_turn_sessions_requests_stay_constant_size_with_tail_retention() -> None:
    turns, retention, threshold = 500, 4, 40
    model = ScriptedLlm([scripted_turn(Chunk(text_delta=f"answer {n}")) for n in range(turns)],
                        scheduler=ImmediateScheduler())
    recorder = Numbered()
    config = EventsCompactionConfig(summarizer=recorder, token_threshold=threshold, event_retention_size=retention)
    runner = InMemoryRunner(LlmAgent("bot", model), events_compaction_config=config)
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()

    for n in range(turns):
        runner.run_async("u1", "s1", f"question {n}").pipe(ops.to_list()).run()

    sizes = [len(request.contents) for request, _ in model.requests]
    # bounded by a constant: one summary, the tail, and what fits under the threshold after it
    # (each turn adds at least 18 characters, a quarter of them counted as tokens)
    bound = 1 + retention + 2 * (threshold * 4 // 18 + 1)
    assert max(sizes[100:]) <= bound
    assert max(sizes[400:]) <= max(sizes[100:200])  # not growing
    assert sizes[-1] <= bound < 2 * turns - 1  # without compaction: 999
    # each summary rolls the one before into it: a request shows one summary, first
    for request, _ in model.requests[100:]:
        shown = [c.text() for c in request.contents if c.text().startswith("summary ")]
        assert len(shown) == 1 and request.contents[0].text() == shown[0]
    assert [given[0].text() for given in recorder.given[1:]] == [f"summary {n}" for n in range(1, len(recorder.given))]
    assert request.contents[-1].text() == f"question {turns - 1}"
    # every event stays stored, the summaries with them
    stored = runner.session_service.get_session(runner.app_name, "u1", "s1").run().events
    assert len(stored) == 2 * turns + len(recorder.given)
    assert len(recorder.given) > turns // 20


def test_tail_retention_and_sliding_window_configuration() -> None:
    both = EventsCompactionConfig(2, 1, token_threshold=10, event_retention_size=3)
    assert both.has_sliding_window and both.has_tail_retention
    tail = EventsCompactionConfig(token_threshold=10, event_retention_size=3)
    assert tail.has_tail_retention and not tail.has_sliding_window
    with pytest.raises(ConfigurationError, match="compacts nothing"):
        EventsCompactionConfig()
    with pytest.raises(ConfigurationError, match="token_threshold and event_retention_size together"):
        EventsCompactionConfig(token_threshold=10)
    with pytest.raises(ConfigurationError, match="compaction_interval and overlap_size together"):
        EventsCompactionConfig(compaction_interval=3)
    with pytest.raises(ConfigurationError, match="event_retention_size must be an int of at least 0"):
        EventsCompactionConfig(token_threshold=10, event_retention_size=-1)
