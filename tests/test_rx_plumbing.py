"""The runtimes' own Rx plumbing (``rxllm._rx.direct``): what the stock operators it replaces guarantee,
and no scheduling."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import reactivex
from reactivex import abc as rx_abc
from reactivex import operators as ops
from reactivex.disposable import Disposable
from reactivex.subject import ReplaySubject, Subject
from virtual_clock import CountingScheduler

from rxllm._rx.direct import (
    Direct,
    call_now,
    collect_then,
    concat_map_now,
    concat_now,
    defer_now,
    emit_now,
    fail_now,
    ignore_items,
    nothing_now,
    tap_next,
    then_now,
)


class Recorder:
    def __init__(self) -> None:
        self.items: list[Any] = []
        self.errors: list[Exception] = []
        self.completed = 0
        self.done = threading.Event()

    def on_next(self, value: Any) -> None:
        self.items.append(value)

    def on_error(self, error: Exception) -> None:
        self.errors.append(error)
        self.done.set()

    def on_completed(self) -> None:
        self.completed += 1
        self.done.set()



def test_direct_stops_after_a_terminal_signal_and_after_dispose() -> None:
    def misbehaving(observer: rx_abc.ObserverBase[int], _: object = None) -> rx_abc.DisposableBase:
        observer.on_next(1)
        observer.on_completed()
        observer.on_next(2)
        observer.on_error(ValueError("late"))
        observer.on_completed()
        return Disposable()

    seen = Recorder()
    Direct(misbehaving).subscribe(seen)
    assert (seen.items, seen.errors, seen.completed) == ([1], [], 1)

    held: list[rx_abc.ObserverBase[int]] = []

    def later(observer: rx_abc.ObserverBase[int], _: object = None) -> rx_abc.DisposableBase:
        held.append(observer)
        return Disposable()

    seen = Recorder()
    subscription = Direct(later).subscribe(seen)
    held[0].on_next(1)
    subscription.dispose()
    held[0].on_next(2)
    held[0].on_completed()
    assert (seen.items, seen.completed) == ([1], 0)


def test_direct_delivers_an_exception_raised_while_subscribing_as_on_error() -> None:
    def broken(observer: rx_abc.ObserverBase[int], _: object = None) -> rx_abc.DisposableBase:
        raise KeyError("boom")

    seen = Recorder()
    Direct(broken).subscribe(seen)
    assert [type(e) for e in seen.errors] == [KeyError]


def test_a_terminal_signal_disposes_the_subscription_as_autodetach_does() -> None:
    disposed = threading.Event()
    held: list[rx_abc.ObserverBase[int]] = []

    def source(observer: rx_abc.ObserverBase[int], _: object = None) -> rx_abc.DisposableBase:
        held.append(observer)
        return Disposable(disposed.set)

    Direct(source).subscribe(Recorder())
    assert not disposed.is_set()
    held[0].on_completed()
    assert disposed.is_set()

    disposed.clear()

    def ends_at_once(observer: rx_abc.ObserverBase[int], _: object = None) -> rx_abc.DisposableBase:
        observer.on_completed()
        return Disposable(disposed.set)

    Direct(ends_at_once).subscribe(Recorder())
    assert disposed.is_set()


def test_the_small_sources_emit_during_subscribe() -> None:
    seen = Recorder()
    then_now(emit_now(1), lambda: call_now(lambda: 2)).subscribe(seen)
    assert (seen.items, seen.completed) == ([1, 2], 1)
    seen = Recorder()
    defer_now(lambda: nothing_now()).subscribe(seen)
    assert (seen.items, seen.completed) == ([], 1)
    seen = Recorder()
    error = ValueError("x")
    ignore_items(then_now(emit_now(1), lambda: fail_now(error))).subscribe(seen)
    assert (seen.items, seen.errors) == ([], [error])
    seen = Recorder()
    defer_now(lambda: (_ for _ in ()).throw(RuntimeError("factory"))).subscribe(seen)  # type: ignore[arg-type]
    assert [type(e) for e in seen.errors] == [RuntimeError]


def test_collect_then_hands_the_items_over_once_the_source_completed() -> None:
    source: Subject[int] = Subject()
    seen = Recorder()
    lists: list[list[int]] = []

    def then(items: list[int]) -> reactivex.Observable[int]:
        lists.append(list(items))
        return emit_now(sum(items))

    collect_then(source, then).subscribe(seen)
    source.on_next(1)
    source.on_next(2)
    assert lists == []
    source.on_completed()
    assert (lists, seen.items, seen.completed) == ([[1, 2]], [3], 1)


def test_tap_next_sees_each_item_before_it_is_passed_on_and_its_error_fails_the_stream() -> None:
    order: list[str] = []
    seen = Recorder()

    def tap(value: int) -> None:
        order.append(f"tap {value}")
        if value == 2:
            raise ValueError("tap")

    def on_next(value: int) -> None:
        order.append(f"got {value}")

    tap_next(reactivex.of(1, 2, 3), tap).subscribe(on_next, seen.on_error, seen.on_completed)
    assert order == ["tap 1", "got 1", "tap 2"]
    assert [type(e) for e in seen.errors] == [ValueError]


def test_concat_now_pulls_lazily_and_never_schedules_on_the_subscribers_scheduler() -> None:
    scheduler = CountingScheduler()
    pulled: list[int] = []

    def sources() -> Iterator[reactivex.Observable[int]]:
        for i in range(3):
            pulled.append(i)
            yield emit_now(i) if i != 1 else then_now(emit_now(10), lambda: emit_now(11))

    seen = Recorder()
    concat_now(sources()).subscribe(seen, scheduler=scheduler)
    assert (seen.items, seen.completed, pulled) == ([0, 10, 11, 2], 1, [0, 1, 2])
    assert scheduler.scheduled == 0

    stock = Recorder()
    reactivex.concat_with_iterable([emit_now(0), emit_now(1)]).subscribe(stock, scheduler=scheduler)
    assert scheduler.scheduled > 0  # what concat_now replaces: a hop per source (a new thread under .run())


def test_concat_now_takes_the_next_source_only_after_the_one_before_completed_on_another_thread() -> None:
    first: Subject[str] = Subject()
    pulled: list[str] = []

    def sources() -> Iterator[reactivex.Observable[str]]:
        pulled.append("first")
        yield first
        pulled.append("second")
        yield emit_now("b")

    seen = Recorder()
    concat_now(sources()).subscribe(seen)
    assert pulled == ["first"]
    worker = threading.Thread(target=lambda: (first.on_next("a"), first.on_completed()))
    worker.start()
    worker.join()
    assert (seen.items, seen.completed, pulled) == (["a", "b"], 1, ["first", "second"])


def test_concat_now_of_many_synchronous_sources_does_not_grow_the_stack() -> None:
    seen = Recorder()
    concat_now(then_now(emit_now(i), nothing_now) for i in range(20_000)).subscribe(seen)
    assert (len(seen.items), seen.completed) == (20_000, 1)


def test_concat_now_dispose_stops_the_active_source_and_takes_no_more() -> None:
    disposed = threading.Event()
    pulled: list[int] = []

    def hanging(observer: rx_abc.ObserverBase[int], _: object = None) -> rx_abc.DisposableBase:
        return Disposable(disposed.set)

    def sources() -> Iterator[reactivex.Observable[int]]:
        pulled.append(0)
        yield Direct(hanging)
        pulled.append(1)
        yield emit_now(1)

    subscription = concat_now(sources()).subscribe(Recorder())
    subscription.dispose()
    assert disposed.is_set() and pulled == [0]


def test_concat_map_now_keeps_order_when_an_inner_completes_later_on_another_thread() -> None:
    source: Subject[str] = Subject()
    slow: Subject[str] = Subject()
    scheduler = CountingScheduler()

    def project(item: str) -> reactivex.Observable[str]:
        return slow if item == "slow" else emit_now(item)

    seen = Recorder()
    concat_map_now(source, project).subscribe(seen, scheduler=scheduler)
    source.on_next("a")
    source.on_next("slow")
    source.on_next("c")  # queued behind "slow"
    source.on_completed()
    assert (seen.items, seen.completed) == (["a"], 0)
    worker = threading.Thread(target=lambda: (slow.on_next("s"), slow.on_completed()))
    worker.start()
    worker.join()
    assert (seen.items, seen.completed) == (["a", "s", "c"], 1)
    assert scheduler.scheduled == 0


def test_concat_map_now_matches_the_stock_concat_map() -> None:
    def project(i: int) -> reactivex.Observable[int]:
        return then_now(emit_now(i), lambda: emit_now(-i)) if i % 2 else emit_now(i)

    ours: list[int] = []
    concat_map_now(reactivex.of(1, 2, 3, 4), project).subscribe(ours.append)
    stock = reactivex.of(1, 2, 3, 4).pipe(ops.concat_map(project), ops.to_list()).run()
    assert ours == stock == [1, -1, 2, 3, -3, 4]


def test_concat_map_now_errors_of_the_projection_and_of_an_inner_fail_the_stream() -> None:
    seen = Recorder()

    def project(i: int) -> reactivex.Observable[int]:
        if i == 2:
            raise LookupError("projection")
        return emit_now(i)

    concat_map_now(reactivex.of(1, 2, 3), project).subscribe(seen)
    assert seen.items == [1] and [type(e) for e in seen.errors] == [LookupError]

    seen = Recorder()
    error = ValueError("inner")
    concat_map_now(reactivex.of(1, 2), lambda i: fail_now(error) if i == 1 else emit_now(i)).subscribe(seen)
    assert (seen.items, seen.errors, seen.completed) == ([], [error], 0)


def test_concat_map_now_dispose_disposes_the_source_and_the_active_inner() -> None:
    outer_disposed = threading.Event()
    inner_disposed = threading.Event()

    def outer(observer: rx_abc.ObserverBase[int], _: object = None) -> rx_abc.DisposableBase:
        observer.on_next(1)
        return Disposable(outer_disposed.set)

    def inner(observer: rx_abc.ObserverBase[int], _: object = None) -> rx_abc.DisposableBase:
        return Disposable(inner_disposed.set)

    subscription = concat_map_now(Direct(outer), lambda _: Direct(inner)).subscribe(Recorder())
    subscription.dispose()
    assert outer_disposed.is_set() and inner_disposed.is_set()


@pytest.mark.parametrize("runs", [100])
def test_concat_map_now_from_many_threads_completes_once_with_every_item(runs: int) -> None:
    for _ in range(runs):
        source: Subject[int] = Subject()
        inners = [ReplaySubject[int]() for _ in range(4)]  # an inner may end before its turn comes
        seen = Recorder()
        concat_map_now(source, inners.__getitem__).subscribe(seen)
        for i in range(4):
            source.on_next(i)
        threads = [threading.Thread(target=lambda s=s, i=i: (s.on_next(i), s.on_completed()))
                   for i, s in enumerate(inners)]
        closer = threading.Thread(target=source.on_completed)
        for thread in [*threads, closer]:
            thread.start()
        for thread in [*threads, closer]:
            thread.join()
        assert seen.done.wait(5)
        assert seen.completed == 1 and sorted(seen.items) == [0, 1, 2, 3] and seen.items == sorted(seen.items)


def test_concat_map_now_projects_nothing_after_the_stream_failed() -> None:
    projected: list[int] = []
    error = ValueError("inner")

    def project(i: int) -> reactivex.Observable[int]:
        projected.append(i)
        return fail_now(error) if i == 1 else emit_now(i)

    seen = Recorder()
    concat_map_now(reactivex.of(1, 2, 3), project).subscribe(seen)
    assert (projected, seen.errors) == ([1], [error])


def test_a_direct_observable_has_the_lock_stock_operators_take_on_their_source() -> None:
    source = emit_now(5)
    with source.lock:  # made on first use, then the same one
        assert source.lock is source.lock
    assert emit_now(5).pipe(ops.delay(0.0), ops.to_list()).run() == [5]  # delay takes its source's lock


def _held_source(log: list[str], emitters: list[rx_abc.ObserverBase[int]]) -> reactivex.Observable[int]:
    """A Direct source that emits 1 and holds its observer (to emit later, from the test)."""

    def subscribe(observer: rx_abc.ObserverBase[int], _: object = None) -> rx_abc.DisposableBase:
        log.append("subscribed")
        emitters.append(observer)
        observer.on_next(1)
        return Disposable(lambda: log.append("disposed"))

    return Direct(subscribe)


@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param(lambda source: defer_now(lambda: source), id="defer_now"),
        pytest.param(lambda source: collect_then(emit_now(0), lambda _: source), id="collect_then-of-known-item"),
        pytest.param(lambda source: collect_then(nothing_now(), lambda _: source), id="collect_then"),
        pytest.param(lambda source: then_now(nothing_now(), lambda: source), id="then_now"),
    ],
)
def test_a_pass_through_of_a_direct_source_stops_and_releases_it_as_a_subscription_of_its_own(wrap: Any) -> None:
    # the pass-through operators hand their own observer to a Direct source: what it delivers after
    # the subscriber disposed is dropped, and disposing releases the source
    log: list[str] = []
    emitters: list[rx_abc.ObserverBase[int]] = []
    recorder = Recorder()
    subscription = wrap(_held_source(log, emitters)).subscribe(recorder)
    assert recorder.items == [1] and log == ["subscribed"]
    emitters[0].on_next(2)
    subscription.dispose()
    assert log == ["subscribed", "disposed"]
    emitters[0].on_next(3)
    emitters[0].on_completed()
    assert recorder.items == [1, 2] and recorder.completed == 0 and not recorder.errors

    # completing later releases the source too, and nothing passes after it
    log.clear()
    emitters.clear()
    recorder = Recorder()
    wrap(_held_source(log, emitters)).subscribe(recorder)
    emitters[0].on_completed()
    assert log == ["subscribed", "disposed"] and recorder.completed == 1
    emitters[0].on_next(4)
    emitters[0].on_error(ValueError("late"))
    assert recorder.items == [1] and recorder.completed == 1 and not recorder.errors


def test_a_pass_through_delivers_an_exception_raised_while_subscribing_its_source_as_on_error() -> None:
    def broken(observer: rx_abc.ObserverBase[int], _: object = None) -> rx_abc.DisposableBase:
        observer.on_next(1)
        raise ValueError("subscribe failed")

    recorder = Recorder()
    defer_now(lambda: Direct(broken)).subscribe(recorder)
    assert recorder.items == [1] and [str(e) for e in recorder.errors] == ["subscribe failed"]

    def raises_after_completing(observer: rx_abc.ObserverBase[int], _: object = None) -> rx_abc.DisposableBase:
        observer.on_completed()
        raise ValueError("after the end")

    with pytest.raises(ValueError, match="after the end"):  # as a Direct subscription of its own: raised again
        defer_now(lambda: Direct(raises_after_completing)).subscribe(Recorder())


def test_collect_then_of_a_known_item_calls_then_per_subscription_and_delivers_its_error() -> None:
    calls: list[list[int]] = []

    def then(items: list[int]) -> reactivex.Observable[int]:
        calls.append(items)
        if len(calls) == 2:
            raise ValueError("then failed")
        return emit_now(items[0] + 1)

    stream = collect_then(emit_now(41), then)
    assert calls == []  # cold
    first, second = Recorder(), Recorder()
    stream.subscribe(first)
    stream.subscribe(second)
    assert calls == [[41], [41]]
    assert first.items == [42] and first.completed == 1
    assert second.items == [] and [str(e) for e in second.errors] == ["then failed"]
