"""ScriptedLlm's timeline model: asynchronous emission on a scheduler, timed items, call records."""

from __future__ import annotations

import threading

import pytest
import reactivex
from reactivex import operators as ops
from reactivex.scheduler import ImmediateScheduler
from reactivex.testing import TestScheduler

from rxllm import Chunk, ConfigurationError, LimitExceededError, LlmRequest, LlmResponse, TransportError
from rxllm.testing import At, ScriptedLlm, at_times, record_in_virtual_time, scripted_turn

REQUEST = LlmRequest()


def _turn(*texts: str) -> list[LlmResponse]:
    return scripted_turn(*(Chunk(text_delta=t) for t in texts))


def _kinds(records: list[tuple[float, object]]) -> list[tuple[float, str, str | None]]:
    out = []
    for t, n in records:
        kind = n.kind  # type: ignore[attr-defined]
        value = n.value.text() if kind == "N" else None  # type: ignore[attr-defined]
        out.append((t, kind, value))
    return out


def test_items_are_emitted_at_their_times_and_completion_follows_the_last() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([at_times(_turn("one ", "two"), [0.1, 0.35, 0.35])], scheduler=clock)
    records = record_in_virtual_time(lambda: llm.generate_content(REQUEST, stream=True), clock)
    assert _kinds(records) == [
        (0.1, "N", "one "),
        (0.35, "N", "two"),
        (0.35, "N", "one two"),
        (0.35, "C", None),
    ]
    [call] = llm.calls
    assert (call.subscribed_at, call.ended_at, call.disposed_at, call.emitted) == (0.0, 0.35, None, 3)
    assert not call.cancelled


def test_untimed_items_follow_the_item_before_them() -> None:
    clock = TestScheduler()
    partial_one, partial_two, final = _turn("a", "b")
    llm = ScriptedLlm([[At(0.2, partial_one), partial_two, At(0.5, final)]], scheduler=clock)
    records = record_in_virtual_time(lambda: llm.generate_content(REQUEST, stream=True), clock)
    assert [(t, k) for t, k, _ in _kinds(records)] == [(0.2, "N"), (0.2, "N"), (0.5, "N"), (0.5, "C")]


def test_an_error_at_its_time_ends_the_turn() -> None:
    clock = TestScheduler()
    boom = TransportError("reset")
    partial = _turn("Hel")[0]
    llm = ScriptedLlm([[At(0.1, partial), At(0.5, boom), At(0.7, partial)]], scheduler=clock)
    records = record_in_virtual_time(lambda: llm.generate_content(REQUEST, stream=True), clock)
    assert [(t, n.kind) for t, n in records] == [(0.1, "N"), (0.5, "E")]
    assert records[1][1].exception is boom
    assert llm.calls[0].ended_at == 0.5


def test_stream_false_emits_the_whole_turn_at_the_time_of_its_last_item() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([at_times(_turn("a", "b"), [0.1, 0.2, 0.3])], scheduler=clock)
    records = record_in_virtual_time(lambda: llm.generate_content(REQUEST, stream=False), clock)
    assert _kinds(records) == [(0.3, "N", "ab"), (0.3, "C", None)]
    assert records[0][1].value.partial is None


def test_stream_false_with_an_error_emits_the_error_at_its_time() -> None:
    clock = TestScheduler()
    boom = TransportError("reset")
    llm = ScriptedLlm([[*at_times(_turn("a"), [0.1, 0.2]), At(0.4, boom)]], scheduler=clock)
    records = record_in_virtual_time(lambda: llm.generate_content(REQUEST), clock)
    assert [(t, n.kind) for t, n in records] == [(0.4, "E")]


@pytest.mark.parametrize("dispose_at", [0.0, 0.05, 0.1, 0.2, 0.34])
def test_cancellation_at_any_instant_is_recorded_and_stops_the_turn(dispose_at: float) -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([at_times(_turn("one ", "two"), [0.1, 0.35, 0.35])], scheduler=clock)
    records = record_in_virtual_time(
        lambda: llm.generate_content(REQUEST, stream=True), clock, dispose_at=dispose_at, until=10.0
    )
    emitted = 1 if dispose_at >= 0.1 else 0  # an item due at the dispose instant was scheduled first
    assert [n.kind for _, n in records] == ["N"] * emitted
    [call] = llm.calls
    assert call.cancelled and call.disposed_at == dispose_at
    assert call.ended_at is None and call.emitted == emitted


def test_disposing_after_the_end_is_not_a_cancellation() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([at_times(_turn("x"), [0.1, 0.1])], scheduler=clock)
    record_in_virtual_time(lambda: llm.generate_content(REQUEST, stream=True), clock, dispose_at=1.0)
    assert llm.calls[0].ended_at == 0.1 and not llm.calls[0].cancelled


def test_nothing_is_emitted_inside_subscribe() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([_turn("now")], scheduler=clock)
    seen: list[LlmResponse] = []
    llm.generate_content(REQUEST, stream=True).subscribe(seen.append)
    assert seen == [] and len(llm.requests) == 1
    clock.start()
    assert [r.text() for r in seen] == ["now", "now"]


def test_the_default_emits_on_another_thread() -> None:
    llm = ScriptedLlm([_turn("hi")])
    threads: set[int] = set()
    done = threading.Event()
    llm.generate_content(REQUEST, stream=True).subscribe(
        lambda _: threads.add(threading.get_ident()), on_completed=done.set
    )
    assert done.wait(5.0)
    assert threads and threading.get_ident() not in threads


def test_timed_items_in_real_time_keep_their_order() -> None:
    llm = ScriptedLlm([at_times(_turn("a", "b"), [0.0, 0.01, 0.02])])
    assert [r.text() for r in llm.generate_content(REQUEST, stream=True).pipe(ops.to_list()).run()] == ["a", "b", "ab"]
    assert llm.calls[0].ended_at is not None and llm.calls[0].ended_at >= llm.calls[0].subscribed_at


def test_immediate_scheduler_gives_synchronous_emission() -> None:
    llm = ScriptedLlm([_turn("sync")], scheduler=ImmediateScheduler())
    seen: list[LlmResponse] = []
    llm.generate_content(REQUEST, stream=True).subscribe(seen.append)
    assert [r.text() for r in seen] == ["sync", "sync"]


def test_share_with_two_subscribers_makes_one_call_and_both_see_the_turn() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([at_times(_turn("a", "b"), [0.1, 0.2, 0.2])], scheduler=clock)
    shared = llm.generate_content(REQUEST, stream=True).pipe(ops.share())
    first: list[str] = []
    second: list[str] = []
    shared.subscribe(lambda r: first.append(r.text()))
    shared.subscribe(lambda r: second.append(r.text()))
    clock.start()
    assert first == second == ["a", "b", "ab"]
    assert len(llm.requests) == 1


def test_running_out_of_turns_fails_asynchronously_too() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([], scheduler=clock)
    errors: list[Exception] = []
    llm.generate_content(REQUEST).subscribe(on_error=errors.append)
    assert errors == []
    clock.start()
    assert isinstance(errors[0], LimitExceededError)


@pytest.mark.parametrize("seconds", [-1.0, float("inf"), float("nan")])
def test_at_refuses_bad_times(seconds: float) -> None:
    with pytest.raises(ConfigurationError):
        At(seconds, LlmResponse())


def test_items_out_of_time_order_are_refused() -> None:
    a, b = _turn("a")
    with pytest.raises(ConfigurationError, match="time order"):
        ScriptedLlm([[At(0.5, a), At(0.2, b)]])


def test_at_times_needs_one_time_per_item() -> None:
    with pytest.raises(ConfigurationError, match="2 item"):
        at_times(_turn("a"), [0.1])


def test_record_in_virtual_time_counts_from_the_subscription_not_from_zero() -> None:
    clock = TestScheduler()
    clock.advance_to(100.0)
    llm = ScriptedLlm([at_times(_turn("a"), [0.1, 0.35])], scheduler=clock)
    records = record_in_virtual_time(lambda: llm.generate_content(REQUEST, stream=True), clock)
    assert [t for t, _ in records] == [0.1, 0.35, 0.35]
    assert llm.calls[0].subscribed_at == 100.0 and llm.calls[0].ended_at == 100.35


def test_record_in_virtual_time_until_stops_the_clock() -> None:
    clock = TestScheduler()
    records = record_in_virtual_time(lambda: reactivex.interval(1.0, scheduler=clock), clock, until=3.5)
    assert [t for t, _ in records] == [1.0, 2.0, 3.0]
    with pytest.raises(ConfigurationError):
        record_in_virtual_time(lambda: reactivex.empty(), clock, dispose_at=-1.0)
