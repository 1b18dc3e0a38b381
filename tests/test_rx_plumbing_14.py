"""The fused operators of ``rxllm._rx.direct``, each against the composition it replaces.

- A step pulled by ``concat_now`` (a ``concat_map_items``) is its own subscriber: no sink between
  its items and the concatenation's observer. Against the same step hidden behind a plain
  ``Direct`` (subscribed as any source, through its own sink): the same items, errors, completion,
  disposals, the same threads, nothing after a dispose (also from within ``on_next``).
- ``collect_then`` of a ``collect_then`` collects both in one subscription; of a ``defer_now``
  makes its Observable in place. Against the nested composition and the stock operators.
- A pass-through (``then_now``'s second source, ``collect_then``'s) delivers an ``emit_now``,
  ``nothing_now`` or ``defer_now`` in place: against the same sources hidden behind a ``Direct``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import reactivex
from reactivex import abc as rx_abc
from reactivex import operators as ops
from reactivex.disposable import Disposable
from rx_support import Held

from rxllm._rx import direct
from rxllm._rx.direct import (
    Direct,
    call_then,
    collect_then,
    concat_map_items,
    concat_map_now,
    concat_now,
    defer_now,
    emit_now,
    fail_now,
    nothing_now,
    then_now,
)


class Recorder:
    """What a subscription got, in order, with the thread each signal came on."""

    def __init__(self, dispose_at: Any = None) -> None:
        self.got: list[tuple[Any, ...]] = []
        self.threads: list[int] = []
        self.dispose_at = dispose_at  # dispose the subscription from within on_next of this item
        self.subscription: rx_abc.DisposableBase | None = None
        self.done = threading.Event()

    def on_next(self, value: Any) -> None:
        self.got.append(("next", value))
        self.threads.append(threading.get_ident())
        if value == self.dispose_at:
            assert self.subscription is not None
            self.subscription.dispose()

    def on_error(self, error: Exception) -> None:
        self.got.append(("error", repr(error)))
        self.threads.append(threading.get_ident())
        self.done.set()

    def on_completed(self) -> None:
        self.got.append(("completed",))
        self.threads.append(threading.get_ident())
        self.done.set()


def hidden(source: reactivex.Observable[Any]) -> reactivex.Observable[Any]:
    """``source`` behind a plain Direct: subscribed as any source, through its own sink (no fusion)."""

    def subscribe(observer: rx_abc.ObserverBase[Any], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        return source.subscribe(observer, scheduler=scheduler)

    return Direct(subscribe)


def on_thread(action: Callable[[], None]) -> None:
    thread = threading.Thread(target=action)
    thread.start()
    thread.join(5)
    assert not thread.is_alive()


def _run(source: reactivex.Observable[Any], recorder: Recorder) -> Recorder:
    recorder.subscription = source.subscribe(recorder)
    return recorder


@pytest.fixture
def fused_steps(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """Whether each ``_ConcatMap`` made was fused (made with a parent serial)."""
    made: list[bool] = []
    original = direct._ConcatMap.__init__

    def counting(self: Any, observer: Any, scheduler: Any, project: Any, item_type: Any, parent: Any = None) -> None:
        made.append(parent is not None)
        original(self, observer, scheduler, project, item_type, parent)

    monkeypatch.setattr(direct._ConcatMap, "__init__", counting)
    yield made


# ---- a step pulled by concat_now: fused against hidden ---------------------------------------------


def _project(value: Any) -> Any:
    """Odd: an item; even: two items through an Observable; 13 raises; an Observable passes as it is."""
    if isinstance(value, reactivex.Observable):
        return value
    if value == 13:
        raise KeyError("unlucky")
    if value % 2:
        return f"item {value}"
    return concat_now([emit_now(f"a {value}"), call_then(lambda: f"stored {value}", nothing_now)])


def _steps(
    first: reactivex.Observable[Any], second: reactivex.Observable[Any], hide: bool
) -> reactivex.Observable[Any]:
    steps = [concat_map_items(first, _project, str), concat_map_items(second, _project, str)]
    return concat_now([hidden(s) for s in steps] if hide else steps)


@pytest.mark.parametrize(
    "first, second",
    [
        ([1, 2, 3], [5, 4]),
        ([], [1]),
        ([1, 13, 3], [5]),  # the projection raises
        ([2, reactivex.throw(ValueError("inner"))], [1]),  # a projected Observable fails
        ([1, reactivex.from_iterable(["x", "y"]), 3], []),
    ],
    ids=["items", "empty", "project-raises", "inner-fails", "inner-observable"],
)
def test_a_fused_step_gives_what_the_hidden_step_gives_synchronously(
    first: list[Any], second: list[Any], fused_steps: list[bool]
) -> None:
    fused = _run(_steps(reactivex.from_iterable(first), reactivex.from_iterable(second), False), Recorder())
    made = list(fused_steps)
    hidden_ = _run(_steps(reactivex.from_iterable(first), reactivex.from_iterable(second), True), Recorder())
    assert fused.got == hidden_.got
    assert made and all(made)  # the fast path was taken for every step it pulled
    assert not any(fused_steps[len(made):])  # and not for a hidden one
    if fused.got[-1] == ("completed",):  # (stock concat_map lets an error overtake the items queued before it)
        stock = reactivex.concat(
            *[
                reactivex.from_iterable(s).pipe(ops.concat_map(lambda v: _as_observable(_project(v))))
                for s in (first, second)
            ]
        )
        assert fused.got == _stock(stock).got


def _as_observable(projected: Any) -> reactivex.Observable[Any]:
    return reactivex.just(projected) if isinstance(projected, str) else projected


def _stock(source: reactivex.Observable[Any]) -> Recorder:
    seen = Recorder()
    source.subscribe(seen)
    return seen


def test_a_fused_step_fails_with_its_sources_error_and_pulls_nothing_more() -> None:
    results = []
    for hide in (False, True):
        first, second = Held(), Held()
        seen = _run(_steps(first, second, hide), Recorder())
        first.emit(1, 2, ValueError("model"), 3, "|")
        results.append((seen.got, len(second.observers), first.disposed))
    assert results[0] == results[1]
    assert results[0][0] == [
        ("next", "item 1"), ("next", "a 2"), ("next", "stored 2"), ("error", "ValueError('model')")
    ]
    assert results[0][1] == 0 and results[0][2] >= 1


@pytest.mark.parametrize("where", ["outer", "on-next"])
def test_a_disposed_fused_step_delivers_nothing_more_and_disposes_its_source_at_once(where: str) -> None:
    results = []
    for hide in (False, True):
        first, second = Held(), Held()
        seen = Recorder(dispose_at="a 2" if where == "on-next" else None)
        _run(_steps(first, second, hide), seen)
        first.emit(1, 2)
        if where == "outer":
            assert seen.subscription is not None
            seen.subscription.dispose()
        disposed_at_once = first.disposed
        first.emit(3, 5, "|")
        results.append((seen.got, disposed_at_once, len(second.observers)))
    assert results[0] == results[1]
    got, disposed_at_once, second_subscribed = results[0]
    assert got == [("next", "item 1"), ("next", "a 2")] + ([("next", "stored 2")] if where == "outer" else [])
    assert disposed_at_once >= 1 and second_subscribed == 0


def test_a_fused_step_delivers_on_the_thread_its_source_emits_on_and_pulls_the_next_there() -> None:
    results = []
    for hide in (False, True):
        first, second = Held(), Held()
        seen = _run(_steps(first, second, hide), Recorder())
        threads: list[int] = []

        def emit_first(first: Held = first, threads: list[int] = threads) -> None:
            threads.append(threading.get_ident())
            first.emit(1, 2, "|")

        on_thread(emit_first)
        assert len(second.observers) == 1  # pulled on that thread, when the first step completed
        on_thread(lambda second=second: second.emit(3, "|"))
        assert seen.done.is_set()
        results.append(seen.got)
        assert seen.threads[:3] == [threads[0]] * 3 and threading.get_ident() not in seen.threads
    assert results[0] == results[1]
    assert results[0] == [("next", "item 1"), ("next", "a 2"), ("next", "stored 2"), ("next", "item 3"), ("completed",)]


def test_a_fused_steps_projected_source_completing_later_on_another_thread_keeps_the_order() -> None:
    results = []
    for hide in (False, True):
        first, inner = Held(), Held()
        seen = _run(_steps(first, reactivex.from_iterable([7]), hide), Recorder())
        first.emit(1, inner, 3, "|")  # 3 waits for inner; completion waits for both
        assert seen.got == [("next", "item 1")]
        on_thread(lambda inner=inner: inner.emit("late", "|"))
        results.append(seen.got)
    assert results[0] == results[1]
    assert results[0] == [("next", "item 1"), ("next", "late"), ("next", "item 3"), ("next", "item 7"), ("completed",)]


def test_a_fused_steps_projected_source_racing_a_dispose_from_another_thread_delivers_nothing_after() -> None:
    first, inner = Held(), Held()
    seen = _run(_steps(first, reactivex.from_iterable([7]), False), Recorder())
    first.emit(1, inner)
    assert seen.subscription is not None
    on_thread(seen.subscription.dispose)
    inner.emit("late", "|")
    first.emit(3, "|")
    assert seen.got == [("next", "item 1")]
    assert inner.disposed >= 1 and first.disposed >= 1


def test_a_fused_step_whose_source_raises_while_subscribing_fails_as_a_direct_subscription_does() -> None:
    def broken(observer: Any, scheduler: Any = None) -> Any:
        raise LookupError("no model")

    class Raising(reactivex.Observable[Any]):
        def subscribe(self, *args: Any, **kwargs: Any) -> Any:  # (not even an Observable's own catch)
            raise LookupError("no model")

    for source in (Direct(broken), Raising()):
        results = [_run(_steps(source, reactivex.from_iterable([1]), hide), Recorder()).got for hide in (False, True)]
        assert results[0] == results[1] == [("error", "LookupError('no model')")]


def test_a_step_fused_in_a_pushing_concatenation_gives_what_the_hidden_one_gives() -> None:
    """A projected Observable that is itself a concat_map_items (a store with temp keys) is fused too."""

    def outer(hide: bool) -> reactivex.Observable[Any]:
        def project(x: int) -> reactivex.Observable[Any]:
            step = concat_map_items(reactivex.from_iterable([x, x + 2]), _project, str)
            return hidden(step) if hide else step

        return concat_map_now(reactivex.from_iterable([1, 2]), project)

    assert _run(outer(False), Recorder()).got == _run(outer(True), Recorder()).got == [
        ("next", "item 1"), ("next", "item 3"), ("next", "a 2"), ("next", "stored 2"),
        ("next", "a 4"), ("next", "stored 4"), ("completed",),
    ]


def test_a_fused_step_completing_then_a_failing_pull_fails_the_concatenation() -> None:
    def sources(hide: bool) -> Iterator[reactivex.Observable[Any]]:
        step = concat_map_items(reactivex.from_iterable([1]), _project, str)
        yield hidden(step) if hide else step
        raise OSError("no next step")

    assert _run(concat_now(sources(False)), Recorder()).got == _run(concat_now(sources(True)), Recorder()).got == [
        ("next", "item 1"), ("error", "OSError('no next step')")
    ]


# ---- collect_then of a collect_then / of a defer_now ------------------------------------------------


def _inner_then(kind: str) -> Callable[[list[int]], reactivex.Observable[Any]]:
    def then(items: list[int]) -> reactivex.Observable[Any]:
        if kind == "emit":
            return emit_now(sum(items))
        if kind == "nothing":
            return nothing_now()
        if kind == "many":
            return reactivex.from_iterable(items)
        if kind == "fails":
            return fail_now(ValueError("inner then's source"))
        raise KeyError("inner then")

    return then


def _outer_then(calls: list[list[Any]]) -> Callable[[list[Any]], reactivex.Observable[Any]]:
    def then(items: list[Any]) -> reactivex.Observable[Any]:
        calls.append(items)
        if items == [99]:
            raise LookupError("outer then")
        return concat_now([emit_now(("got", tuple(items))), emit_now("end")])

    return then


@pytest.mark.parametrize("kind", ["emit", "nothing", "many", "fails", "raises"])
@pytest.mark.parametrize("items", [[1, 2], [99], []], ids=["two", "outer-raises", "none"])
def test_a_collection_of_a_collection_gives_the_nested_and_the_stock_compositions_results(
    kind: str, items: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[int] = []
    original = direct._FirstThen.__init__

    def counting(self: Any, *args: Any) -> None:
        made.append(1)
        original(self, *args)

    monkeypatch.setattr(direct._FirstThen, "__init__", counting)
    source = reactivex.from_iterable(items)
    fused_calls: list[list[Any]] = []
    fused = _run(collect_then(collect_then(source, _inner_then(kind)), _outer_then(fused_calls)), Recorder())
    fused_made = len(made)
    nested_calls: list[list[Any]] = []
    nested = _run(collect_then(hidden(collect_then(source, _inner_then(kind))), _outer_then(nested_calls)), Recorder())
    stock_calls: list[list[Any]] = []
    stock = _stock(
        source.pipe(
            ops.to_list(), ops.flat_map(_inner_then(kind)), ops.to_list(), ops.flat_map(_outer_then(stock_calls))
        )
    )
    assert fused.got == nested.got == stock.got
    assert fused_calls == nested_calls == stock_calls
    if kind in ("emit", "nothing"):
        assert fused_made == 1 and len(made) - fused_made == 2  # one subscription where the nesting had two


def test_a_collection_of_a_collection_disposed_before_its_source_completes_calls_neither_then() -> None:
    calls: list[str] = []

    def inner(items: list[int]) -> reactivex.Observable[int]:
        calls.append("inner")
        return emit_now(len(items))

    def outer(items: list[int]) -> reactivex.Observable[int]:
        calls.append("outer")
        return emit_now(items[0])

    for hide in (False, True):
        held = Held()
        nested = collect_then(held, inner)
        seen = _run(collect_then(hidden(nested) if hide else nested, outer), Recorder())
        held.emit(1, 2)
        assert seen.subscription is not None
        on_thread(seen.subscription.dispose)
        held.emit(3, "|")
        assert seen.got == [] and calls == [] and held.disposed >= 1


def test_a_collection_of_a_collection_completing_on_another_thread_delivers_there() -> None:
    results = []
    for hide in (False, True):
        held = Held()
        nested = collect_then(held, _inner_then("emit"))
        seen = _run(collect_then(hidden(nested) if hide else nested, _outer_then([])), Recorder())
        on_thread(lambda held=held: held.emit(1, 2, "|"))
        results.append(seen.got)
        assert threading.get_ident() not in seen.threads and len(set(seen.threads)) == 1
    assert results[0] == results[1] == [("next", ("got", (3,))), ("next", "end"), ("completed",)]


def test_a_collection_of_a_defer_makes_its_observable_on_each_subscribe_and_delivers_its_error() -> None:
    made: list[int] = []

    def factory() -> reactivex.Observable[int]:
        made.append(1)
        if len(made) == 3:
            raise KeyError("factory")
        return reactivex.from_iterable([1, 2])

    lean = collect_then(defer_now(factory), lambda items: emit_now(sum(items)))
    composed = collect_then(hidden(defer_now(factory)), lambda items: emit_now(sum(items)))
    assert made == []  # nothing made before a subscription
    assert _run(lean, Recorder()).got == _run(composed, Recorder()).got == [("next", 3), ("completed",)]
    assert made == [1, 1]
    assert _run(lean, Recorder()).got == [("error", "KeyError('factory')")]


# ---- a pass-through delivers emit_now / nothing_now / defer_now in place ------------------------------


@pytest.mark.parametrize(
    "second",
    [
        lambda: emit_now(2),
        lambda: nothing_now(),
        lambda: defer_now(lambda: emit_now(3)),
        lambda: defer_now(lambda: defer_now(lambda: reactivex.from_iterable([4, 5]))),
        lambda: defer_now(lambda: (_ for _ in ()).throw(KeyError("factory"))),
    ],
    ids=["emit", "nothing", "defer", "defer-of-defer", "defer-raises"],
)
def test_a_pass_through_of_a_small_source_gives_what_its_subscription_gives(second: Callable[[], Any]) -> None:
    lean = _run(then_now(emit_now(1), second), Recorder()).got
    composed = _run(then_now(emit_now(1), lambda: hidden(second())), Recorder()).got
    stock = _stock(reactivex.concat(reactivex.just(1), reactivex.defer(lambda _: second()))).got
    assert lean == composed == stock


def test_a_pass_through_emit_whose_observer_raises_fails_with_that_error() -> None:
    class Raising(Recorder):
        def on_next(self, value: Any) -> None:
            super().on_next(value)
            if value == 2:
                raise ValueError("observer")

    lean = _run(then_now(emit_now(1), lambda: emit_now(2)), Raising()).got
    composed = _run(then_now(emit_now(1), lambda: hidden(emit_now(2))), Raising()).got
    assert lean == composed == [("next", 1), ("next", 2), ("error", "ValueError('observer')")]


def test_a_pass_through_disposed_from_within_on_next_makes_nothing_more() -> None:
    made: list[int] = []

    def second() -> reactivex.Observable[int]:
        def factory() -> reactivex.Observable[int]:
            made.append(1)
            return emit_now(2)

        return defer_now(factory)

    for hide in (False, True):
        first = Held()
        seen = _run(then_now(first, (lambda: hidden(second())) if hide else second), Recorder(dispose_at=1))
        first.emit(1, "|")
        assert seen.got == [("next", 1)]
    assert made == []
    seen = _run(then_now(emit_now(1), second), Recorder())
    assert seen.got == [("next", 1), ("next", 2), ("completed",)] and made == [1]


def test_a_collection_of_a_collection_disposed_by_its_inner_then_calls_no_outer_then() -> None:
    for hide in (False, True):
        held = Held()
        seen = Recorder()
        calls: list[str] = []

        def inner(items: list[int], seen: Recorder = seen) -> reactivex.Observable[int]:
            assert seen.subscription is not None
            seen.subscription.dispose()  # (a dispose landing between the two collections' ends)
            return emit_now(len(items))

        def outer(items: list[int], calls: list[str] = calls) -> reactivex.Observable[int]:
            calls.append("outer")
            return emit_now(items[0])

        nested = collect_then(held, inner)
        _run(collect_then(hidden(nested) if hide else nested, outer), seen)
        held.emit(1, "|")
        assert seen.got == [] and calls == [], hide


# ---- a serial holds its active source's subscription in place ------------------------------------------


@pytest.mark.parametrize("hide", [False, True], ids=["fused-step", "plain-source"])
def test_a_source_whose_subscribe_disposes_the_concatenation_is_disposed_once_subscribed(hide: bool) -> None:
    first = Held()
    disposals: list[str] = []
    seen = Recorder()

    def subscribe(observer: Any, scheduler: Any = None) -> Any:
        assert seen.subscription is not None
        seen.subscription.dispose()  # (another thread's dispose, landing while this source subscribes)
        observer.on_next(1)
        return Disposable(lambda: disposals.append("second"))

    second: reactivex.Observable[Any] = Direct(subscribe)
    if not hide:
        second = concat_map_items(second, _project, str)
    _run(concat_now([first, second]), seen)
    first.emit("x", "|")
    assert disposals == ["second"]  # released at once, though the concatenation was disposed before it returned
    # what it emits after the dispose is not delivered (a step is held before it starts; a plain
    # source's items pass the serial's own check)
    assert seen.got == [("next", "x")]


def test_a_fused_step_raising_while_subscribing_after_a_dispose_is_dropped_and_after_its_end_raised() -> None:
    for disposes in (True, False):
        first = Held()
        seen = Recorder()

        def subscribe(observer: Any, scheduler: Any = None, disposes: bool = disposes, seen: Recorder = seen) -> Any:
            if disposes:
                assert seen.subscription is not None
                seen.subscription.dispose()
            else:
                observer.on_completed()
            raise LookupError("late")

        _run(concat_now([first, concat_map_items(Direct(subscribe), _project, str)]), seen)
        if disposes:
            first.emit("x", "|")
            assert seen.got == [("next", "x")]
        else:  # (Direct.subscribe's: an exception after the source ended is raised again)
            with pytest.raises(LookupError):
                first.emit("x", "|")


def test_a_concatenation_disposes_each_finished_sources_subscription_and_the_active_one_on_dispose() -> None:
    sources = [Held(), Held(), Held()]
    seen = _run(concat_now(sources), Recorder())
    sources[0].emit(1, "|")
    sources[1].emit(2, "|")
    assert [s.disposed >= 1 for s in sources] == [True, True, False]
    assert seen.subscription is not None
    on_thread(seen.subscription.dispose)
    assert sources[2].disposed >= 1
    sources[2].emit(3, "|")
    assert seen.got == [("next", 1), ("next", 2)]


@pytest.mark.parametrize("runs", [150])
def test_a_steps_items_and_projected_sources_completing_on_other_threads_keep_their_order(runs: int) -> None:
    """The item fast path takes no lock while nothing is active: items racing projected sources that
    complete on worker threads still come out in projection order, completed once."""
    for run in range(runs):
        workers: list[threading.Thread] = []

        def project(value: int, workers: list[threading.Thread] = workers) -> Any:
            if value % 3:
                return f"item {value}"

            def subscribe(
                observer: Any, scheduler: Any = None, value: int = value, workers: list[threading.Thread] = workers
            ) -> Any:
                def finish() -> None:
                    observer.on_next(f"inner {value}")
                    observer.on_completed()

                workers.append(threading.Thread(target=finish))
                workers[-1].start()
                return Disposable()

            return Direct(subscribe)

        source = Held()
        seen = _run(concat_now([concat_map_items(source, project, str), emit_now("next step")]), Recorder())
        for value in range(12):
            source.emit(value)
        source.emit("|")
        assert seen.done.wait(5), run
        for worker in workers:
            worker.join(5)
        expected = [("next", f"inner {v}" if v % 3 == 0 else f"item {v}") for v in range(12)]
        assert seen.got == [*expected, ("next", "next step"), ("completed",)], run
