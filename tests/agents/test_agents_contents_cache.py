"""The incremental request contents (``rxllm.agents._flows.contents_cache``) against the full builder.

The full builder, ``tuple(map(safe_content, request_contents(events, ...)))``, is the reference:
random histories (text, thoughts, calls and responses with ids, long-running and dangling calls,
other agents, branches, partials, rewinds, compactions, confirmations, values JSON cannot carry,
timestamps in order and not) are checked after every appended event, for several agents,
branches and both ``include_contents``; then the invalidation cases (edited, shortened,
reloaded, rewound, replaced histories), and that an append costs only the appended events.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence

import pytest

from rxllm import Blob, Content, FunctionCall, FunctionResponse, Part, UsageMetadata
from rxllm._tools import safe_content
from rxllm.agents import Event, EventActions, EventCompaction, InMemorySessionService, LlmEventSummarizer, Session
from rxllm.agents._flows import contents_cache
from rxllm.agents._flows.contents import IncludeContents, request_contents
from rxllm.agents._flows.contents_cache import IncrementalContents, session_request_contents
from rxllm.agents._runners.compaction import TailRetentionEventCompactor, _latest_prompt_tokens
from rxllm.testing import ScriptedLlm

CONFIRM = "adk_request_confirmation"
VIEWS: list[tuple[str, str | None, IncludeContents]] = [
    ("bot", None, "default"),
    ("bot", "a.b", "default"),
    ("helper", "a", "default"),
    ("", None, "default"),
    ("bot", None, "none"),
    ("helper", "a.b", "none"),
]


def reference(events: Sequence[Event], agent: str, branch: str | None, mode: IncludeContents) -> tuple[Content, ...]:
    return tuple(map(safe_content, request_contents(events, agent_name=agent, branch=branch, include_contents=mode)))


class History:
    """A random event history, grown one event at a time."""

    def __init__(self, rng: random.Random, ordered: bool) -> None:
        self.rng = rng
        self.ordered = ordered
        self.clock = 0.0
        self.events: list[Event] = []
        self.calls: list[str] = []
        self.invocations: list[str] = ["inv0"]
        self.counter = 0

    def timestamp(self) -> float:
        rng = self.rng
        if self.ordered:
            self.clock += rng.choice((0.0, 1.0, 1.0, 2.0))  # ties too
            return self.clock
        if rng.random() < 0.02:
            return float("nan")
        return float(rng.randint(0, 40))

    def new_id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def part(self, author: str) -> Part:
        rng = self.rng
        kind = rng.random()
        if kind < 0.35:
            text = rng.choice(("hello", "an answer", " ", "", "caf\ud800e"))  # a lone surrogate now and then
            return Part.from_text(text)
        if kind < 0.42:
            return Part(text="thinking", thought=True)
        if kind < 0.45:
            return Part(thought=True, thought_signature=b"sig")
        if kind < 0.48:
            return Part(inline_data=Blob(mime_type="image/png", data=b"\x89PNG"))
        if kind < 0.72:
            if rng.random() < 0.1:
                call_id: str | None = None
            elif self.calls and rng.random() < 0.1:
                call_id = rng.choice(self.calls)  # an id used again
            else:
                call_id = self.new_id("c")
                self.calls.append(call_id)
            name = CONFIRM if rng.random() < 0.05 else rng.choice(("lookup", "book"))
            args: dict[str, object] = {"n": rng.choice((1, True, 2.5, "x"))}
            return Part(function_call=FunctionCall(id=call_id, name=name, args=args))  # type: ignore[arg-type]
        answered = rng.choice(self.calls) if self.calls and rng.random() < 0.85 else self.new_id("unknown")
        response: dict[str, object] = {"result": rng.choice((1, "ok", float("nan"), [1, 2]))}
        name = CONFIRM if rng.random() < 0.05 else "lookup"
        return Part(function_response=FunctionResponse(id=answered, name=name, response=response))  # type: ignore[arg-type]

    def event(self) -> Event:
        rng = self.rng
        kind = rng.random()
        author = rng.choice(("user", "user", "bot", "bot", "bot", "helper", "other"))
        branch = rng.choice((None, None, None, "a", "a.b", "a.c", "b", "ab"))
        if rng.random() < 0.3:
            self.invocations.append(self.new_id("inv"))
        invocation = self.invocations[-1] if rng.random() < 0.8 else rng.choice(self.invocations)
        timestamp = self.timestamp()
        if kind < 0.04 and len(self.invocations) > 1:
            target = rng.choice(self.invocations[:-1]) if rng.random() < 0.8 else "nowhere"
            return Event(author="user", invocation_id=invocation, timestamp=timestamp,
                         actions=EventActions(rewind_before_invocation_id=target))
        if kind < 0.12 and self.events:
            stamps = [e.timestamp for e in self.events]
            start, end = sorted(rng.sample(stamps, 2)) if len(stamps) > 1 else (stamps[0], stamps[0])
            if rng.random() < 0.15:
                start, end = end, start  # a reversed span now and then
            summary = Content(role=rng.choice(("model", None)), parts=(Part.from_text(f"summary {self.counter}"),))
            self.counter += 1
            return Event(author="user", invocation_id=invocation, timestamp=timestamp, branch=branch,
                         actions=EventActions(compaction=EventCompaction(
                             start_timestamp=start, end_timestamp=end, compacted_content=summary)))
        if kind < 0.15:
            return Event(author=author, invocation_id=invocation, timestamp=timestamp, branch=branch)
        parts = tuple(self.part(author) for _ in range(rng.choice((1, 1, 1, 2, 3))))
        role = rng.choice(("user" if author == "user" else "model", None))
        calls = [p.function_call.id for p in parts if p.function_call is not None and p.function_call.id]
        long_running = tuple(c for c in calls if rng.random() < 0.3) or None
        return Event(author=author, invocation_id=invocation, timestamp=timestamp, branch=branch,
                     content=Content(role=role, parts=parts), long_running_tool_ids=long_running,
                     partial=True if rng.random() < 0.05 else None)


@pytest.mark.parametrize("seed", range(8))
def test_the_incremental_contents_equal_the_full_builders_after_every_append(seed: int) -> None:
    histories, length = 6, 40
    rng = random.Random(seed)
    for number in range(histories):
        history = History(rng, ordered=number % 3 != 0)
        builders = [IncrementalContents(*view) for view in VIEWS]
        for _ in range(length):
            history.events.append(history.event())
            events = tuple(history.events)
            for builder, view in zip(builders, VIEWS, strict=True):
                assert builder.contents(events) == reference(events, *view), (seed, number, len(events), view)


@pytest.mark.parametrize("seed", range(3))
def test_the_incremental_contents_follow_edited_shortened_and_reloaded_histories(seed: int) -> None:
    rng = random.Random(100 + seed)
    for number in range(8):
        history = History(rng, ordered=number % 2 == 0)
        builders = [IncrementalContents(*view) for view in VIEWS]
        for _ in range(30):
            change = rng.random()
            if change < 0.08 and history.events:  # an earlier event edited in place of the original
                index = rng.randrange(len(history.events))
                history.events[index] = history.event()
            elif change < 0.14 and history.events:  # an event deleted
                del history.events[rng.randrange(len(history.events))]
            elif change < 0.18:  # reloaded: equal events, fresh objects
                history.events = [e.model_copy(deep=True) for e in history.events]
            elif change < 0.21:  # shortened
                del history.events[rng.randrange(len(history.events) + 1):]
            else:
                history.events.append(history.event())
            events = list(history.events)  # a list given, not a tuple
            for builder, view in zip(builders, VIEWS, strict=True):
                assert builder.contents(events) == reference(events, *view), (seed, number, view)


def said(author: str, text: str, timestamp: float, invocation: str = "i", branch: str | None = None) -> Event:
    role = "user" if author == "user" else "model"
    return Event(author=author, invocation_id=invocation, timestamp=timestamp, branch=branch,
                 content=Content(role=role, parts=(Part.from_text(text),)))


def call(call_id: str, timestamp: float, args: dict[str, object] | None = None, invocation: str = "i") -> Event:
    function_call = FunctionCall(id=call_id, name="lookup", args=args or {})  # type: ignore[arg-type]
    return Event(author="bot", invocation_id=invocation, timestamp=timestamp,
                 content=Content(role="model", parts=(Part(function_call=function_call),)))


def answer(call_id: str, timestamp: float, author: str = "bot", invocation: str = "i") -> Event:
    response = FunctionResponse(id=call_id, name="lookup", response={"ok": True})
    return Event(author=author, invocation_id=invocation, timestamp=timestamp,
                 content=Content(role="user", parts=(Part(function_response=response),)))


def summary(start: float, end: float, text: str, timestamp: float) -> Event:
    content = Content(role="model", parts=(Part.from_text(text),))
    return Event(author="user", invocation_id="c", timestamp=timestamp, actions=EventActions(
        compaction=EventCompaction(start_timestamp=start, end_timestamp=end, compacted_content=content)))


def texts(contents: Sequence[Content]) -> list[str]:
    return [c.text() or ",".join(str(p.function_call or p.function_response) for p in c.parts) for c in contents]


def test_an_append_scrubs_and_filters_only_the_appended_events(monkeypatch: pytest.MonkeyPatch) -> None:
    scrubbed: list[Content] = []

    def counting(content: Content) -> Content:
        scrubbed.append(content)
        return safe_content(content)

    monkeypatch.setattr(contents_cache, "safe_content", counting)
    events: list[Event] = []
    for n in range(100):
        events += [said("user", f"q{n}", 4 * n), call(f"c{n}", 4 * n + 1), answer(f"c{n}", 4 * n + 2),
                   said("bot", f"a{n}", 4 * n + 3)]
        if n % 10 == 9:
            events.append(summary(4 * n - 30, 4 * n + 3, f"s{n}", 4 * n + 3))
    builder = IncrementalContents("bot", None)
    builder.contents(tuple(events))
    scrubbed.clear()
    events += [said("user", "next", 1000), said("bot", "reply", 1001)]
    assert builder.contents(tuple(events)) == reference(events, "bot", None, "default")
    assert [c.text() for c in scrubbed] == ["next", "reply"]
    scrubbed.clear()
    events.append(summary(900, 1001, "latest", 1002))  # a compaction arriving: one summary more scrubbed
    assert builder.contents(tuple(events)) == reference(events, "bot", None, "default")
    assert [c.text() for c in scrubbed] == ["latest"]


def test_an_equal_but_different_value_is_never_taken_for_the_seen_one() -> None:
    # 1 == True, so the edited event equals the original: the builder checks identity
    events = [said("user", "go", 1), call("c1", 2, {"n": 1}), answer("c1", 3)]
    builder = IncrementalContents("bot", None)
    assert builder.contents(events)[1].parts[0].function_call.args == {"n": 1}  # type: ignore[union-attr]
    content = Content(role="model", parts=(Part(function_call=FunctionCall(id="c1", name="lookup", args={"n": True})),))
    edited = [events[0], events[1].model_copy(update={"content": content}), events[2]]
    assert edited == events
    got = builder.contents(edited)
    assert got == reference(edited, "bot", None, "default")
    assert got[1].parts[0].function_call.args["n"] is True  # type: ignore[union-attr]


def test_a_late_answer_to_a_dropped_call_brings_the_call_back() -> None:
    events = [said("user", "go", 1), call("c1", 2), said("user", "and?", 3)]
    builder = IncrementalContents("bot", None)
    assert texts(builder.contents(events)) == ["go", "and?"]  # the dangling call left out
    events.append(answer("c1", 4, author="user"))
    got = builder.contents(events)
    assert got == reference(events, "bot", None, "default")
    assert "c1" in texts(got)[1]  # the call is back, the answer moved next to it


def test_a_rewind_drops_the_rewound_invocation_from_the_next_contents() -> None:
    events = [said("user", "one", 1, "i1"), said("bot", "first", 2, "i1"), said("user", "two", 3, "i2"),
              said("bot", "second", 4, "i2")]
    builder = IncrementalContents("bot", None)
    assert texts(builder.contents(events)) == ["one", "first", "two", "second"]
    events.append(Event(author="user", invocation_id="i3", timestamp=5,
                        actions=EventActions(rewind_before_invocation_id="i2")))
    assert texts(builder.contents(events)) == ["one", "first"]
    events.append(said("user", "three", 6, "i4"))
    assert texts(builder.contents(events)) == ["one", "first", "three"]


def test_the_current_turn_moves_with_each_user_message() -> None:
    builder = IncrementalContents("bot", None, "none")
    events = [said("bot", "hi", 1)]
    assert builder.contents(events) == ()
    events += [said("user", "q1", 2), said("bot", "a1", 3)]
    assert texts(builder.contents(events)) == ["q1", "a1"]
    events += [said("helper", "meanwhile", 4)]
    assert texts(builder.contents(events)) == ["For context:[helper] said: meanwhile"]
    events += [said("user", "q2", 5)]
    assert texts(builder.contents(events)) == ["q2"]


def test_a_summary_before_later_ones_and_events_out_of_order_still_equal_the_full_build() -> None:
    builder = IncrementalContents("bot", None)
    events = [said("user", f"q{n}", n) for n in range(10)]
    for extra in (summary(2, 5, "s25", 10), said("user", "late", 3.5), summary(1, 6, "s16", 11),
                  said("user", "early", 0.5), summary(8, 9, "s89", 12), said("user", "after", 20)):
        events.append(extra)
        assert builder.contents(events) == reference(events, "bot", None, "default")
    # ADK's walk goes from the end of the stored order: the events stored late stop it early
    assert texts(builder.contents(events)) == [*(f"q{n}" for n in range(10)), "late", "early", "s16", "s89", "after"]


def test_sessions_share_builders_by_key_and_never_see_stale_contents() -> None:
    service = InMemorySessionService()
    session = service.create_session("app", "u1", session_id="s1").run()
    for n in range(3):
        service.append_event(session, said("user", f"q{n}", n)).run()
        service.append_event(session, said("bot", f"a{n}", n + 0.5)).run()
    stored = service.get_session("app", "u1", "s1").run()
    assert stored is not None

    def built(s: Session) -> list[str]:
        got = session_request_contents(s, agent_name="bot", branch=None)
        assert got == reference(s.events, "bot", None, "default")
        return texts(got)

    assert built(stored) == ["q0", "a0", "q1", "a1", "q2", "a2"]
    patched = stored.model_copy(update={"state": {"k": 1}})  # a PATCH of the state: the same events
    assert built(patched) == ["q0", "a0", "q1", "a1", "q2", "a2"]
    service.append_event(session, said("user", "q3", 4)).run()
    again = service.get_session("app", "u1", "s1").run()
    assert again is not None
    assert built(again) == ["q0", "a0", "q1", "a1", "q2", "a2", "q3"]
    # another store's session of the same ids, a reload (fresh objects), a deleted event
    other = Session(id="s1", app_name="app", user_id="u1", events=(said("user", "elsewhere", 1),))
    assert built(other) == ["elsewhere"]
    reloaded = again.model_copy(update={"events": tuple(e.model_copy(deep=True) for e in again.events)})
    assert built(reloaded) == ["q0", "a0", "q1", "a1", "q2", "a2", "q3"]
    assert built(again.model_copy(update={"events": again.events[:2] + again.events[3:]})) == [
        "q0", "a0", "a1", "q2", "a2", "q3"]
    assert built(again) == ["q0", "a0", "q1", "a1", "q2", "a2", "q3"]


def test_the_builders_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contents_cache, "_MAX_BUILDERS", 3)
    monkeypatch.setattr(contents_cache, "_BUILDERS", type(contents_cache._BUILDERS)())
    for n in range(5):
        session = Session(id=f"s{n}", app_name="app", user_id="u1", events=(said("user", "hi", 1),))
        assert texts(session_request_contents(session, agent_name="bot", branch=None)) == ["hi"]
    assert [key[2] for key in contents_cache._BUILDERS] == ["s2", "s3", "s4"]


def test_concurrent_callers_of_one_session_each_get_the_full_contents() -> None:
    events = tuple(e for n in range(50) for e in (said("user", f"q{n}", 2 * n), said("bot", f"a{n}", 2 * n + 1)))
    sessions = [Session(id="shared", app_name="app", user_id="u1", events=events[: 2 * k]) for k in range(1, 51)]
    barrier = threading.Barrier(4)
    failures: list[str] = []

    def run(offset: int) -> None:
        barrier.wait()
        for session in sessions[offset::2] + sessions[::-3]:
            if session_request_contents(session, agent_name="bot", branch=None) != reference(
                session.events, "bot", None, "default"
            ):
                failures.append(session.id)

    threads = [threading.Thread(target=run, args=(k % 2,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_the_tail_compactor_finds_the_latest_prompt_count_in_a_grown_edited_or_other_history() -> None:
    compactor = TailRetentionEventCompactor(contents_cache_summarizer(), retention_size=1, token_threshold=100)

    def counted(event: Event, tokens: int) -> Event:
        return event.model_copy(update={"usage_metadata": UsageMetadata(prompt_token_count=tokens)})

    events = [said("user", "q", 1), counted(said("bot", "a", 2), 150), said("user", "q2", 3)]
    grown = [*events, said("bot", "a2", 4)]
    cases = [
        (events, ["q", "a"]),
        (grown, ["q", "a", "q2"]),  # grown, no newer count: the earlier one stands
        ([*events, counted(said("bot", "a2", 4), 50)], []),  # grown, a newer count within the threshold
        ([events[0], said("bot", "a", 2), events[2]], []),  # edited: no count, the text's estimate is small
        (grown, ["q", "a", "q2"]),  # back to the grown events
        ([], []),
    ]
    for history, expected in cases:
        assert compactor._prompt_tokens(history) == _latest_prompt_tokens(history)
        assert [e.text() for e in compactor.events_to_compact(history)] == expected


def contents_cache_summarizer() -> LlmEventSummarizer:
    return LlmEventSummarizer(ScriptedLlm([]))
