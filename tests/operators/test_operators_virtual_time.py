"""Every operator of rxllm.operators, in virtual time against timed ScriptedLlm turns (no sleeps)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import reactivex
from reactivex import operators as ops
from reactivex.notification import Notification
from reactivex.scheduler import ImmediateScheduler
from reactivex.testing import TestScheduler

from rxllm import (
    Chunk,
    ConfigurationError,
    Content,
    ContractViolationError,
    FunctionCall,
    HttpStatusError,
    LlmRequest,
    LlmResponse,
    Part,
    RetryPolicy,
    StreamTimeoutError,
    ToolCallFragment,
    TransportError,
    UsageMetadata,
    retry_before_first_item,
)
from rxllm.operators import (
    check_contract,
    collect_text,
    fallback,
    final,
    first_item_timeout,
    hedge,
    idle_timeout,
    partials,
    text_deltas,
)
from rxllm.testing import At, ScriptedLlm, assert_stream_protocol, at_times, record_in_virtual_time, scripted_turn

REQUEST = LlmRequest()
Records = list[tuple[float, Notification[Any]]]


def _turn(*texts: str) -> list[LlmResponse]:
    return scripted_turn(*(Chunk(text_delta=t) for t in texts))


def _timed(turn: Sequence[LlmResponse | Exception], *times: float) -> list[At]:
    return at_times(turn, list(times))


def _summary(records: Records) -> list[tuple[float, str, Any]]:
    out: list[tuple[float, str, Any]] = []
    for t, n in records:
        if n.kind == "N":
            value = n.value.text() if isinstance(n.value, LlmResponse) else n.value
        elif n.kind == "E":
            value = type(n.exception).__name__
        else:
            value = None
        out.append((t, n.kind, value))
    return out


def _run(clock: TestScheduler, create: Callable[[], reactivex.Observable[Any]], **options: float) -> Records:
    return record_in_virtual_time(create, clock, **options)


# --- first_item_timeout ----------------------------------------------------------------------------------


def test_first_item_timeout_fires_disposes_the_call_and_is_typed() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([_timed(_turn("late"), 3.0, 3.0)], scheduler=clock)
    records = _run(clock, lambda: llm.generate_content(REQUEST, stream=True).pipe(first_item_timeout(2.0, clock)))
    [(at, notification)] = records
    assert at == 2.0 and notification.kind == "E"
    error = notification.exception
    assert isinstance(error, StreamTimeoutError) and isinstance(error, TransportError)
    assert (error.limit, error.retryable) == ("first_item", True)
    assert "2 s" in str(error)
    assert llm.calls[0].disposed_at == 2.0 and llm.calls[0].emitted == 0


def test_first_item_timeout_stops_watching_after_the_first_item() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([_timed(_turn("a", "b"), 1.0, 9.0, 9.0)], scheduler=clock)
    records = _run(clock, lambda: llm.generate_content(REQUEST, stream=True).pipe(first_item_timeout(2.0, clock)))
    assert _summary(records) == [(1.0, "N", "a"), (9.0, "N", "b"), (9.0, "N", "ab"), (9.0, "C", None)]


def test_first_item_timeout_lets_an_earlier_error_through_and_then_stays_quiet() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([[At(0.5, HttpStatusError(400))]], scheduler=clock)
    records = _run(clock, lambda: llm.generate_content(REQUEST).pipe(first_item_timeout(2.0, clock)))
    assert _summary(records) == [(0.5, "E", "HttpStatusError")]


def test_disposing_before_the_deadline_cancels_the_timer() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([_timed(_turn("late"), 3.0, 3.0)], scheduler=clock)
    records = _run(
        clock, lambda: llm.generate_content(REQUEST).pipe(first_item_timeout(2.0, clock)), dispose_at=1.0
    )
    assert records == []
    assert llm.calls[0].disposed_at == 1.0


@pytest.mark.parametrize("seconds", [0, -1.0, float("inf"), float("nan"), True])
@pytest.mark.parametrize("operator", [first_item_timeout, idle_timeout])
def test_timeouts_refuse_bad_durations(operator: Callable[[float], object], seconds: float) -> None:
    with pytest.raises(ConfigurationError):
        operator(seconds)


# --- idle_timeout ----------------------------------------------------------------------------------------


def test_idle_timeout_fires_after_a_silence_between_items() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([_timed(_turn("a", "b", "c"), 1.0, 2.5, 9.0, 9.0)], scheduler=clock)
    records = _run(clock, lambda: llm.generate_content(REQUEST, stream=True).pipe(idle_timeout(2.0, clock)))
    assert _summary(records) == [(1.0, "N", "a"), (2.5, "N", "b"), (4.5, "E", "StreamTimeoutError")]
    error = records[-1][1].exception
    assert error.limit == "idle" and "2 item(s)" in str(error)
    assert llm.calls[0].disposed_at == 4.5 and llm.calls[0].emitted == 2


def test_idle_timeout_fires_before_the_first_item_too() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([_timed(_turn("a"), 5.0, 5.0)], scheduler=clock)
    records = _run(clock, lambda: llm.generate_content(REQUEST, stream=True).pipe(idle_timeout(2.0, clock)))
    assert _summary(records) == [(2.0, "E", "StreamTimeoutError")]


def test_idle_timeout_passes_a_steady_stream() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([_timed(_turn("a", "b", "c"), 1.9, 3.8, 5.7, 5.7)], scheduler=clock)
    records = _run(clock, lambda: llm.generate_content(REQUEST, stream=True).pipe(idle_timeout(2.0, clock)))
    assert [k for _, k, _ in _summary(records)] == ["N", "N", "N", "N", "C"]


def test_idle_timeout_survives_a_subscriber_that_disposes_from_on_next() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([_timed(_turn("a", "b"), 1.0, 2.0, 2.0)], scheduler=clock)
    records = _run(
        clock, lambda: llm.generate_content(REQUEST, stream=True).pipe(idle_timeout(2.0, clock), ops.take(1))
    )
    assert _summary(records) == [(1.0, "N", "a"), (1.0, "C", None)]
    assert llm.calls[0].disposed_at == 1.0


def test_idle_timeout_with_a_synchronous_source() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([_turn("a")], scheduler=ImmediateScheduler())
    records = _run(clock, lambda: llm.generate_content(REQUEST, stream=True).pipe(idle_timeout(1.0, clock)))
    assert [k for _, k, _ in _summary(records)] == ["N", "N", "C"]


# --- fallback --------------------------------------------------------------------------------------------


def _fallback_pair(clock: TestScheduler, primary_turn: list[Any]) -> tuple[ScriptedLlm, ScriptedLlm]:
    primary = ScriptedLlm([primary_turn], scheduler=clock, model="primary")
    backup = ScriptedLlm([_timed(_turn("backup"), 0.2, 0.2)], scheduler=clock, model="backup")
    return primary, backup


def test_fallback_switches_when_the_first_call_fails_before_its_first_item() -> None:
    clock = TestScheduler()
    primary, backup = _fallback_pair(clock, [At(1.0, HttpStatusError(503))])
    records = _run(
        clock,
        lambda: primary.generate_content(REQUEST, stream=True).pipe(
            fallback(lambda: backup.generate_content(REQUEST, stream=True))
        ),
    )
    assert _summary(records) == [(1.2, "N", "backup"), (1.2, "N", "backup"), (1.2, "C", None)]
    assert backup.calls[0].subscribed_at == 1.0
    assert_stream_protocol([n.value for _, n in records if n.kind == "N"])


def test_fallback_after_the_first_item_lets_the_error_through_and_never_calls_the_other() -> None:
    clock = TestScheduler()
    boom = TransportError("reset")
    primary, backup = _fallback_pair(clock, [At(0.5, _turn("one ")[0]), At(1.0, boom)])
    records = _run(
        clock,
        lambda: primary.generate_content(REQUEST, stream=True).pipe(
            fallback(lambda: backup.generate_content(REQUEST, stream=True))
        ),
    )
    assert _summary(records) == [(0.5, "N", "one "), (1.0, "E", "TransportError")]
    assert records[-1][1].exception is boom
    assert backup.requests == []


def test_fallback_is_not_called_when_the_first_call_succeeds() -> None:
    clock = TestScheduler()
    primary, backup = _fallback_pair(clock, _timed(_turn("fine"), 0.1, 0.1))
    records = _run(
        clock, lambda: primary.generate_content(REQUEST).pipe(fallback(lambda: backup.generate_content(REQUEST)))
    )
    assert _summary(records) == [(0.1, "N", "fine"), (0.1, "C", None)]
    assert backup.requests == []


def test_fallback_when_filters_the_errors_it_handles() -> None:
    clock = TestScheduler()
    primary, backup = _fallback_pair(clock, [At(1.0, HttpStatusError(400))])

    def retryable_only(error: Exception) -> bool:
        return isinstance(error, HttpStatusError) and error.retryable

    records = _run(
        clock,
        lambda: primary.generate_content(REQUEST).pipe(
            fallback(lambda: backup.generate_content(REQUEST), when=retryable_only)
        ),
    )
    assert _summary(records) == [(1.0, "E", "HttpStatusError")]
    assert backup.requests == []


def test_a_failing_factory_is_the_streams_error() -> None:
    clock = TestScheduler()
    primary, _ = _fallback_pair(clock, [At(1.0, HttpStatusError(503))])

    def broken() -> reactivex.Observable[LlmResponse]:
        raise ConfigurationError("no backup configured")

    records = _run(clock, lambda: primary.generate_content(REQUEST).pipe(fallback(broken)))
    assert _summary(records) == [(1.0, "E", "ConfigurationError")]


@pytest.mark.parametrize(("dispose_at", "disposed"), [(0.5, "primary"), (1.1, "backup")])
def test_disposing_fallback_cancels_the_call_in_flight(dispose_at: float, disposed: str) -> None:
    clock = TestScheduler()
    primary, backup = _fallback_pair(clock, [At(1.0, HttpStatusError(503))])
    records = _run(
        clock,
        lambda: primary.generate_content(REQUEST).pipe(fallback(lambda: backup.generate_content(REQUEST))),
        dispose_at=dispose_at,
    )
    assert records == []
    if disposed == "primary":
        assert primary.calls[0].disposed_at == 0.5 and backup.requests == []
    else:
        assert primary.calls[0].ended_at == 1.0 and backup.calls[0].disposed_at == 1.1


# --- check_contract --------------------------------------------------------------------------------------


def _partial(text: str = "", **fields: Any) -> LlmResponse:
    return LlmResponse(content=Content(role="model", parts=(Part.from_text(text),)), partial=True, **fields)


def _final(text: str = "", **fields: Any) -> LlmResponse:
    return LlmResponse(content=Content(role="model", parts=(Part.from_text(text),)), **fields)


CALL = Content(role="model", parts=(Part(function_call=FunctionCall(name="f", args={}, id="c1")),))

BROKEN: dict[str, list[LlmResponse]] = {
    "item_after_final": [_partial("a"), _final("a"), _partial("b")],
    "partial_function_calls": [LlmResponse(content=CALL, partial=True), _final("")],
    "partial_usage": [_partial("a", usage_metadata=UsageMetadata(total_token_count=3)), _final("a")],
    "text_mismatch": [_partial("a"), _partial("b"), _final("b")],
    "thought_mismatch": [
        LlmResponse(content=Content(role="model", parts=(Part(text="hm", thought=True),)), partial=True),
        _final(""),
    ],
    "no_final": [_partial("a"), _partial("b")],
}


@pytest.mark.parametrize("rule", sorted(BROKEN))
def test_check_contract_names_the_broken_rule_the_moment_it_breaks(rule: str) -> None:
    clock = TestScheduler()
    items = BROKEN[rule]
    times = [round(0.1 * (i + 1), 9) for i in range(len(items))]
    llm = ScriptedLlm([[*at_times(items, times), At(5.0, _partial("never"))]], scheduler=clock)
    records = _run(clock, lambda: llm.generate_content(REQUEST, stream=True).pipe(check_contract()))
    *passed, (at, failure) = records
    assert failure.kind == "E"
    assert isinstance(failure.exception, ContractViolationError) and failure.exception.rule == rule
    if rule == "no_final":
        assert at == 5.0  # at completion, after the last partial
    else:
        bad = times[len(passed)]
        assert at == bad
        assert llm.calls[0].disposed_at == bad  # the source was disposed at the violation
    with pytest.raises(AssertionError):  # the pure checker agrees
        assert_stream_protocol(items)


def test_check_contract_no_final_fails_at_completion() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([_timed(BROKEN["no_final"], 0.1, 0.2)], scheduler=clock)
    records = _run(clock, lambda: llm.generate_content(REQUEST, stream=True).pipe(check_contract()))
    assert _summary(records) == [(0.1, "N", "a"), (0.2, "N", "b"), (0.2, "E", "ContractViolationError")]


@pytest.mark.parametrize(
    "items",
    [
        _turn("a", "b"),
        [_final("whole")],
        scripted_turn(
            Chunk(thought_delta="plan"),
            Chunk(text_delta="x"),
            Chunk(tool_call_fragments=(ToolCallFragment(0, "c1", "f", "{}"),)),
        ),
    ],
    ids=["text", "lone-final", "thought-and-call"],
)
def test_check_contract_passes_a_correct_stream_unchanged(items: list[LlmResponse]) -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([items], scheduler=clock)
    records = _run(clock, lambda: llm.generate_content(REQUEST, stream=True).pipe(check_contract()))
    assert [n.value for _, n in records if n.kind == "N"] == items
    assert records[-1][1].kind == "C"
    assert_stream_protocol(items)


def test_check_contract_lets_a_source_error_through() -> None:
    clock = TestScheduler()
    boom = TransportError("reset")
    llm = ScriptedLlm([[At(0.1, _partial("a")), At(0.2, boom)]], scheduler=clock)
    records = _run(clock, lambda: llm.generate_content(REQUEST, stream=True).pipe(check_contract()))
    assert records[-1][1].exception is boom


# --- projections -----------------------------------------------------------------------------------------


def _thought_turn() -> list[LlmResponse]:
    return scripted_turn(Chunk(thought_delta="hm"), Chunk(text_delta="a"), Chunk(text_delta=""), Chunk(text_delta="b"))


def test_text_deltas_are_the_partials_text_in_time() -> None:
    clock = TestScheduler()
    turn = _thought_turn()
    llm = ScriptedLlm([at_times(turn, [0.1 * (i + 1) for i in range(len(turn))])], scheduler=clock)
    records = _run(clock, lambda: llm.generate_content(REQUEST, stream=True).pipe(text_deltas()))
    deltas = [(t, n.value) for t, n in records if n.kind == "N"]
    assert [d for _, d in deltas] == ["a", "b"]
    assert "".join(d for _, d in deltas) == turn[-1].text()
    assert records[-1][1].kind == "C"


def test_text_deltas_of_a_lone_final_is_its_text() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([_thought_turn()], scheduler=clock)
    records = _run(clock, lambda: llm.generate_content(REQUEST, stream=False).pipe(text_deltas()))
    assert [n.value for _, n in records if n.kind == "N"] == ["ab"]


def test_final_emits_the_final_as_it_arrives() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([_timed(_turn("a", "b"), 0.1, 0.2, 0.3)], scheduler=clock)
    records = _run(clock, lambda: llm.generate_content(REQUEST, stream=True).pipe(final()))
    assert _summary(records) == [(0.3, "N", "ab"), (0.3, "C", None)]
    assert records[0][1].value.partial is None


def test_partials_drop_the_final() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([_timed(_turn("a", "b"), 0.1, 0.2, 0.3)], scheduler=clock)
    records = _run(clock, lambda: llm.generate_content(REQUEST, stream=True).pipe(partials()))
    assert _summary(records) == [(0.1, "N", "a"), (0.2, "N", "b"), (0.3, "C", None)]


def test_collect_text_emits_the_whole_text_once_at_completion() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([_timed(_turn("Hello", " world"), 0.1, 0.2, 0.3)], scheduler=clock)
    records = _run(clock, lambda: llm.generate_content(REQUEST, stream=True).pipe(collect_text()))
    assert _summary(records) == [(0.3, "N", "Hello world"), (0.3, "C", None)]


@pytest.mark.parametrize("operator", [final, collect_text], ids=["final", "collect_text"])
def test_projections_that_need_a_final_fail_without_one(operator: Callable[[], Any]) -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([_timed(BROKEN["no_final"], 0.1, 0.2)], scheduler=clock)
    records = _run(clock, lambda: llm.generate_content(REQUEST, stream=True).pipe(operator()))
    assert records[-1][0] == 0.2
    error = records[-1][1].exception
    assert isinstance(error, ContractViolationError) and error.rule == "no_final"


@pytest.mark.parametrize("operator", [final, collect_text, partials, text_deltas])
def test_projections_pass_errors_and_dispose_the_source(operator: Callable[[], Any]) -> None:
    clock = TestScheduler()
    boom = TransportError("reset")
    llm = ScriptedLlm([[At(0.1, _partial("a")), At(0.5, boom)], _timed(_turn("a", "b"), 0.1, 0.2, 0.3)],
                      scheduler=clock)
    records = _run(clock, lambda: llm.generate_content(REQUEST, stream=True).pipe(operator()))
    assert records[-1][1].exception is boom
    start = clock.clock
    _run(clock, lambda: llm.generate_content(REQUEST, stream=True).pipe(operator()), dispose_at=0.15)
    assert llm.calls[1].disposed_at == round(start + 0.15, 9)
    assert llm.calls[1].emitted == 1


# --- hedge -----------------------------------------------------------------------------------------------


def _hedge_models(clock: TestScheduler, *turns: list[Any]) -> list[ScriptedLlm]:
    return [ScriptedLlm([turn], scheduler=clock, model=f"m{i}") for i, turn in enumerate(turns)]


def _hedged(models: list[ScriptedLlm], delay: float, clock: TestScheduler) -> Callable[[], reactivex.Observable[Any]]:
    first, *others = models

    def factory(model: ScriptedLlm) -> Callable[[], reactivex.Observable[LlmResponse]]:
        return lambda: model.generate_content(REQUEST, stream=True)

    return lambda: first.generate_content(REQUEST, stream=True).pipe(
        hedge(delay, *(factory(m) for m in others), scheduler=clock)
    )


def test_hedge_makes_no_second_call_when_the_first_is_quick() -> None:
    clock = TestScheduler()
    models = _hedge_models(clock, _timed(_turn("quick"), 0.5, 0.5), _timed(_turn("backup"), 0.1, 0.1))
    records = _run(clock, _hedged(models, 1.0, clock))
    assert _summary(records) == [(0.5, "N", "quick"), (0.5, "N", "quick"), (0.5, "C", None)]
    assert models[1].requests == []


def test_hedge_starts_a_second_call_after_the_delay_and_the_first_item_wins() -> None:
    clock = TestScheduler()
    models = _hedge_models(clock, _timed(_turn("slow"), 5.0, 5.0), _timed(_turn("fast ", "one"), 0.5, 0.7, 0.7))
    records = _run(clock, _hedged(models, 1.0, clock))
    assert _summary(records) == [(1.5, "N", "fast "), (1.7, "N", "one"), (1.7, "N", "fast one"), (1.7, "C", None)]
    assert models[1].calls[0].subscribed_at == 1.0
    assert models[0].calls[0].disposed_at == 1.5  # the loser is disposed when the winner's first item arrives
    assert_stream_protocol([n.value for _, n in records if n.kind == "N"])


def test_hedge_the_first_call_can_still_win_after_the_second_started() -> None:
    clock = TestScheduler()
    models = _hedge_models(clock, _timed(_turn("first"), 1.2, 1.2), _timed(_turn("second"), 0.5, 0.5))
    records = _run(clock, _hedged(models, 1.0, clock))
    assert _summary(records) == [(1.2, "N", "first"), (1.2, "N", "first"), (1.2, "C", None)]
    assert models[1].calls[0].disposed_at == 1.2


def test_hedge_starts_one_call_per_delay() -> None:
    clock = TestScheduler()
    models = _hedge_models(
        clock, _timed(_turn("a"), 9.0, 9.0), _timed(_turn("b"), 9.0, 9.0), _timed(_turn("c"), 0.5, 0.5)
    )
    records = _run(clock, _hedged(models, 1.0, clock))
    assert [m.calls[0].subscribed_at for m in models] == [0.0, 1.0, 2.0]
    assert _summary(records)[0] == (2.5, "N", "c")
    assert models[0].calls[0].disposed_at == models[1].calls[0].disposed_at == 2.5


def test_hedge_replaces_a_call_that_fails_before_any_winner_at_once() -> None:
    clock = TestScheduler()
    models = _hedge_models(clock, [At(0.3, HttpStatusError(503))], _timed(_turn("b"), 0.1, 0.1))
    records = _run(clock, _hedged(models, 1.0, clock))
    assert models[1].calls[0].subscribed_at == 0.3
    assert _summary(records) == [(0.4, "N", "b"), (0.4, "N", "b"), (0.4, "C", None)]


def test_hedge_fails_with_the_last_error_when_every_call_fails() -> None:
    clock = TestScheduler()
    last = HttpStatusError(502)
    models = _hedge_models(clock, [At(1.5, HttpStatusError(503))], [At(1.0, last)])
    records = _run(clock, _hedged(models, 1.0, clock))
    assert _summary(records) == [(2.0, "E", "HttpStatusError")]
    assert records[0][1].exception is last


def test_hedge_ignores_a_losers_error_and_passes_the_winners() -> None:
    clock = TestScheduler()
    boom = TransportError("reset")
    models = _hedge_models(
        clock, [At(1.5, _partial("w")), At(2.0, boom)], [At(3.0, HttpStatusError(503))]
    )
    records = _run(clock, _hedged(models, 1.0, clock))
    assert _summary(records) == [(1.5, "N", "w"), (2.0, "E", "TransportError")]
    assert models[1].calls[0].disposed_at == 1.5


def test_disposing_a_hedge_disposes_every_running_call() -> None:
    clock = TestScheduler()
    models = _hedge_models(clock, _timed(_turn("a"), 9.0, 9.0), _timed(_turn("b"), 9.0, 9.0))
    records = _run(clock, _hedged(models, 1.0, clock), dispose_at=1.5)
    assert records == []
    assert [m.calls[0].disposed_at for m in models] == [1.5, 1.5]


def test_hedge_refuses_a_bad_delay() -> None:
    with pytest.raises(ConfigurationError):
        hedge(-1.0)


# --- an operator that stops its source disposes it before the subscriber hears why ---------------------


@pytest.mark.parametrize("stop", ["first_item_timeout", "idle_timeout", "check_contract"])
def test_the_source_is_disposed_before_the_error_is_delivered(stop: str) -> None:
    clock = TestScheduler()
    if stop == "check_contract":
        turn: list[Any] = [At(0.1, _final("a")), At(0.2, _partial("b")), At(9.0, _final("b"))]
        operator: Any = check_contract()
    else:
        turn = _timed(_turn("late"), 9.0, 9.0)
        operator = first_item_timeout(1.0, clock) if stop == "first_item_timeout" else idle_timeout(1.0, clock)
    llm = ScriptedLlm([turn], scheduler=clock)
    cancelled_when_told: list[bool] = []

    def on_error(_: Exception) -> None:
        cancelled_when_told.append(llm.calls[0].cancelled)

    llm.generate_content(REQUEST, stream=True).pipe(operator).subscribe(on_error=on_error)
    clock.advance_to(10.0)
    assert cancelled_when_told == [True]


# --- the timeouts and the retry policy -------------------------------------------------------------------


def test_a_first_item_timeout_is_retried_by_the_retry_policy() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([_timed(_turn("stuck"), 5.0, 5.0), _timed(_turn("quick"), 0.1, 0.1)], scheduler=clock)
    attempt = llm.generate_content(REQUEST, stream=True).pipe(first_item_timeout(1.0, clock))
    records = _run(clock, lambda: retry_before_first_item(attempt, RetryPolicy(jitter="none"), scheduler=clock))
    assert _summary(records) == [(1.5, "N", "quick"), (1.5, "N", "quick"), (1.5, "C", None)]
    assert [c.subscribed_at for c in llm.calls] == [0.0, 1.4]  # timed out at 1.0, backoff 0.4
    assert llm.calls[0].disposed_at == 1.0


def test_an_idle_timeout_after_the_first_item_is_not_retried() -> None:
    clock = TestScheduler()
    llm = ScriptedLlm([_timed(_turn("a", "b"), 0.1, 5.0, 5.0), _turn("spare")], scheduler=clock)
    attempt = llm.generate_content(REQUEST, stream=True).pipe(idle_timeout(1.0, clock))
    records = _run(clock, lambda: retry_before_first_item(attempt, RetryPolicy(), scheduler=clock))
    assert _summary(records) == [(0.1, "N", "a"), (1.1, "E", "StreamTimeoutError")]
    assert len(llm.requests) == 1
