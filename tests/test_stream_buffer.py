"""The bounded buffer behind ``for`` and ``async for`` builds its pieces only when used: the condition
variable once a thread waits on it, the queue once a second item waits behind the first. Each
test checks that a consumer or an emitter that does wait is still woken, and that leaving while
it waits disposes the subscription."""

from __future__ import annotations

import asyncio
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


def _until(condition: Any, what: str) -> None:
    """Spin (yielding the GIL) until ``condition()``: a state the other thread reaches, not a delay."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0)


def _tracked(subject: Subject[int], disposed: threading.Event) -> reactivex.Observable[int]:
    def subscribe(observer: rx_abc.ObserverBase[int], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        inner = subject.subscribe(observer)

        def dispose() -> None:
            disposed.set()
            inner.dispose()

        return Disposable(dispose)

    return reactivex.create(subscribe)


def test_an_async_consumer_waiting_is_woken_by_an_item_from_another_thread_without_a_condition() -> None:
    subject: Subject[int] = Subject()
    got: list[int] = []

    async def main() -> None:
        items = rxllm.aio.iterate(subject)
        channel = items._channel
        waiting = asyncio.ensure_future(items.__anext__())
        await asyncio.sleep(0)  # one loop turn: the consumer subscribed and awaits its future
        assert channel._waiter is not None
        def emit() -> None:
            for i in (1, 2, 3):
                subject.on_next(i)

        emitter = threading.Thread(target=emit)
        emitter.start()
        got.append(await asyncio.wait_for(waiting, 10))
        emitter.join()
        got.extend([await items.__anext__(), await items.__anext__()])  # queued behind the first, in order
        assert channel._cond is None  # nobody ever waited on a condition
        await items.aclose()

    asyncio.run(main())
    assert got == [1, 2, 3]


def test_items_queue_in_order_behind_the_first_while_the_consumer_is_busy() -> None:
    async def main() -> list[int]:
        return [item async for item in rxllm.aio.iterate(reactivex.of(*range(10)))]

    assert asyncio.run(main()) == list(range(10))


def test_leaving_while_the_async_consumer_waits_disposes_the_subscription() -> None:
    subject: Subject[int] = Subject()
    disposed = threading.Event()

    async def main() -> None:
        items = rxllm.aio.iterate(_tracked(subject, disposed))
        waiting = asyncio.ensure_future(items.__anext__())
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert disposed.is_set()
        subject.on_next(1)  # after leaving: ignored
        with pytest.raises(StopAsyncIteration):
            await items.__anext__()

    asyncio.run(main())


def test_a_blocking_consumer_builds_the_condition_when_it_waits_and_is_woken() -> None:
    subject: Subject[int] = Subject()
    items = rxllm.iterate(subject)
    channel = items._channel
    got: list[int] = []
    consumer = threading.Thread(target=lambda: got.extend(items))
    consumer.start()
    _until(lambda: channel._cond is not None, "the consumer waits")
    subject.on_next(1)
    subject.on_next(2)
    subject.on_completed()
    consumer.join(10)
    assert not consumer.is_alive() and got == [1, 2]


def test_an_emitter_waiting_for_room_builds_the_condition_is_woken_and_freed_by_close() -> None:
    subject: Subject[int] = Subject()
    disposed = threading.Event()
    items = rxllm.iterate(_tracked(subject, disposed), max_buffer=1)
    channel = items._channel
    channel.start()
    assert channel._cond is None
    emitted: list[int] = []

    def emit() -> None:
        for i in range(3):
            subject.on_next(i)
            emitted.append(i)

    emitter = threading.Thread(target=emit)
    emitter.start()
    _until(lambda: channel._producer_waiting, "the emitter waits for room")  # 0 is in, 1 waits
    assert channel._cond is not None
    assert next(items) == 0  # room: the emitter is woken and puts 1 in, then waits with 2
    _until(lambda: emitted == [0, 1] and channel._producer_waiting, "the emitter waits again")
    items.close()  # leaving while it waits: it returns, and the subscription is disposed
    emitter.join(10)
    assert not emitter.is_alive() and disposed.is_set()
    with pytest.raises(StopIteration):
        next(items)
