"""``concat_map_now``'s pass-through of ``emit_now`` items behaves as the stock ``concat_map``.

An item projected to ``emit_now(value)`` while nothing is active is handed on at once, without the
drain loop (what the agent flow does for every partial event); these hold it to the order,
completion, re-entrancy and disposal of ``ops.concat_map``.
"""

from __future__ import annotations

from typing import Any

import reactivex
from reactivex import operators as ops
from reactivex.subject import Subject

from rxllm._rx.direct import concat_map_now, emit_now


def _events(source: reactivex.Observable[Any]) -> list[Any]:
    seen: list[Any] = []
    source.subscribe(seen.append, lambda e: seen.append(("error", str(e))), lambda: seen.append("completed"))
    return seen


def test_emitted_items_pass_in_order_around_an_inner_that_completes_later() -> None:
    held: Subject[str] = Subject()

    def project(item: int) -> reactivex.Observable[Any]:
        return held if item == 2 else emit_now(item)

    outer: Subject[int] = Subject()
    seen = _events(concat_map_now(outer, project))
    outer.on_next(1)
    outer.on_next(2)  # active until held completes
    outer.on_next(3)  # queued behind it
    outer.on_completed()
    assert seen == [1]
    held.on_next("from 2")
    held.on_completed()
    assert seen == [1, "from 2", 3, "completed"]


def test_an_item_pushed_from_within_on_next_comes_after_the_one_being_delivered() -> None:
    for operator in (lambda s, p: concat_map_now(s, p), lambda s, p: s.pipe(ops.concat_map(p))):
        outer: Subject[int] = Subject()
        seen: list[Any] = []

        def on_next(value: int, seen: list[Any] = seen, outer: Subject[int] = outer) -> None:
            seen.append(value)
            if value == 1:
                outer.on_next(2)  # re-entrant: delivered after 1's delivery returned
                seen.append("after push")

        operator(outer, emit_now).subscribe(on_next, on_completed=lambda seen=seen: seen.append("completed"))
        outer.on_next(1)
        outer.on_completed()
        assert seen == [1, "after push", 2, "completed"], operator


def test_completion_waits_for_nothing_when_every_item_was_emitted() -> None:
    ours = _events(concat_map_now(reactivex.from_iterable([1, 2, 3]), emit_now))
    stock = _events(reactivex.from_iterable([1, 2, 3]).pipe(ops.concat_map(lambda i: reactivex.just(i))))
    assert ours == stock == [1, 2, 3, "completed"]


def test_disposing_from_within_on_next_delivers_nothing_more() -> None:
    outer: Subject[int] = Subject()
    seen: list[int] = []
    subscription: list[Any] = []

    def on_next(value: int) -> None:
        seen.append(value)
        subscription[0].dispose()

    subscription.append(concat_map_now(outer, emit_now).subscribe(on_next))
    outer.on_next(1)
    outer.on_next(2)
    assert seen == [1] and not outer.observers  # the source was disposed too
