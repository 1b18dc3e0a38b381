"""What keeps an open ``async for`` / ``for`` stream small keeps its guarantees: the subscription is
held as the source returned it (a dispose asked while the source's ``subscribe`` runs is done when
it returns), one callback serves both terminal signals (the first one wins), every buffer shares
one lock (a consumer waiting on one stream never holds up another stream), and a partial's
``Content`` dict is no bigger than a plain dict of the same values."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any

import pytest
import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable
from reactivex.subject import Subject

import rxllm
import rxllm.aio
from rxllm import Content, LlmResponse, Part
from rxllm._models.aggregation import build_partial


class _Boom(Exception):
    pass


def _closing_while_subscribing(close: list[Any], disposed: threading.Event) -> reactivex.Observable[int]:
    """A source whose ``subscribe`` closes the consumer's iterator (as a finalizer or another thread may) and
    emits an item after that, then returns a disposable that records its dispose."""

    def subscribe(observer: rx_abc.ObserverBase[int], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        close[0]()
        observer.on_next(1)  # after the consumer left: ignored
        return Disposable(disposed.set)

    return reactivex.create(subscribe)


def test_an_async_iterator_closed_while_its_source_subscribes_disposes_when_subscribe_returns() -> None:
    disposed = threading.Event()
    close: list[Any] = []

    async def main() -> list[int]:
        items = rxllm.aio.iterate(_closing_while_subscribing(close, disposed))
        close.append(items._channel.close)
        got = [item async for item in items]
        assert disposed.is_set()  # at once, not when the iterator is dropped
        return got

    assert asyncio.run(main()) == []


def test_a_blocking_iterator_closed_while_its_source_subscribes_disposes_when_subscribe_returns() -> None:
    disposed = threading.Event()
    close: list[Any] = []
    items = rxllm.iterate(_closing_while_subscribing(close, disposed))
    close.append(items.close)
    assert list(items) == []
    assert disposed.is_set()


def test_a_closed_iterator_never_subscribes() -> None:
    subscribed: list[bool] = []

    def subscribe(observer: rx_abc.ObserverBase[int], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        subscribed.append(True)
        return Disposable()

    source: reactivex.Observable[int] = reactivex.create(subscribe)

    async def main() -> list[int]:
        items = rxllm.aio.iterate(source)
        await items.aclose()
        return [item async for item in items]

    assert asyncio.run(main()) == [] and subscribed == []
    blocking = rxllm.iterate(source)
    blocking.close()
    assert list(blocking) == [] and subscribed == []


def _ends_twice(first: str) -> reactivex.Observable[int]:
    def subscribe(observer: rx_abc.ObserverBase[int], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        observer.on_next(1)
        if first == "completed":
            observer.on_completed()
            observer.on_error(_Boom("after the end"))
        else:
            observer.on_error(_Boom("the end"))
            observer.on_completed()
        observer.on_next(2)
        return Disposable()

    # reactivex.create would stop after the first terminal itself: subscribe the buffer's callbacks directly
    class Raw(reactivex.Observable[int]):
        def subscribe(self, on_next: Any = None, on_error: Any = None, on_completed: Any = None, *,
                      scheduler: Any = None) -> rx_abc.DisposableBase:
            class Observer:
                pass

            observer = Observer()
            observer.on_next, observer.on_error, observer.on_completed = on_next, on_error, on_completed  # type: ignore[attr-defined]
            disposable: rx_abc.DisposableBase = subscribe(observer)  # type: ignore[arg-type]
            return disposable

    return Raw()


@pytest.mark.parametrize("consumer", ["async", "blocking"])
def test_the_first_terminal_signal_wins_and_nothing_after_it_is_delivered(consumer: str) -> None:
    def collect(source: reactivex.Observable[int]) -> list[int]:
        if consumer == "blocking":
            return list(rxllm.iterate(source))

        async def main() -> list[int]:
            return [item async for item in rxllm.aio.iterate(source)]

        return asyncio.run(main())

    assert collect(_ends_twice("completed")) == [1]
    with pytest.raises(_Boom, match="the end"):
        collect(_ends_twice("error"))


def test_a_consumer_waiting_on_one_stream_does_not_hold_up_another_stream() -> None:
    """Every buffer shares one lock: a blocking consumer waiting (on its condition) releases it, so another
    stream's emitter on a third thread and its ``async for`` consumer go on meanwhile."""
    waited_on: Subject[int] = Subject()
    other: Subject[int] = Subject()
    blocked = rxllm.iterate(waited_on)
    got: list[int] = []
    consumer = threading.Thread(target=lambda: got.extend(blocked))
    consumer.start()
    deadline = time.monotonic() + 10
    while blocked._channel._cond is None:  # spin (yielding the GIL) until the consumer waits on its condition
        assert time.monotonic() < deadline, "the consumer never waited"
        time.sleep(0)

    async def main() -> list[int]:
        items = rxllm.aio.iterate(other)
        first = asyncio.ensure_future(items.__anext__())
        while items._channel._waiter is None:
            await asyncio.sleep(0)
        def emit() -> None:
            other.on_next(7)
            other.on_next(8)
            other.on_completed()

        emitter = threading.Thread(target=emit)
        emitter.start()
        result = [await asyncio.wait_for(first, 10)] + [item async for item in items]
        emitter.join()
        return result

    assert asyncio.run(main()) == [7, 8]
    assert consumer.is_alive() and got == []  # still waiting on its own stream
    waited_on.on_next(1)
    waited_on.on_completed()
    consumer.join(10)
    assert not consumer.is_alive() and got == [1]


def test_a_partials_dicts_are_no_bigger_than_plain_ones_and_it_equals_the_validated_partial() -> None:
    partial = build_partial("answer", "thinking")
    validated = LlmResponse.model_validate(
        {"content": {"role": "model", "parts": [{"text": "thinking", "thought": True}, {"text": "answer"}]},
         "partial": True}
    )
    assert partial == validated and partial.model_dump() == validated.model_dump()
    assert partial.model_dump_json() == validated.model_dump_json()
    for model in (partial, partial.content, *partial.content.parts):  # type: ignore[union-attr]
        state = model.__dict__
        assert sys.getsizeof(state) <= sys.getsizeof(dict(state))
    if sys.implementation.name == "cpython" and sys.version_info[:2] == (3, 11):  # a split table there
        assert sys.getsizeof(partial.content.__dict__) < sys.getsizeof(dict(partial.content.__dict__))
    content = partial.content
    assert isinstance(content, Content) and all(isinstance(part, Part) for part in content.parts)
    assert content.__dict__ == {"role": "model", "parts": content.parts}
