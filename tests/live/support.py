"""Helpers of the live tests: collect a connection's responses with a safety-net timeout."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import reactivex

from rxllm import LlmResponse

TIMEOUT = 10.0  # a safety net; nothing in a passing run waits for it


@dataclass
class Collected:
    items: list[LlmResponse] = field(default_factory=list)
    error: Exception | None = None
    completed: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    first: threading.Event = field(default_factory=threading.Event)

    def wait(self) -> Collected:
        assert self.done.wait(TIMEOUT), f"no terminal event; got {self.items}"
        return self

    def texts(self) -> list[str]:
        return [r.text() for r in self.items]


def collect(source: reactivex.Observable[LlmResponse], *, until_turn_complete: bool = False) -> Collected:
    """Subscribe now; ``until_turn_complete`` stops (disposing) after the first ``turn_complete``."""
    out = Collected()
    if until_turn_complete:
        from reactivex import operators as ops

        source = source.pipe(ops.take_while(lambda r: not r.turn_complete, inclusive=True))

    def on_next(item: LlmResponse) -> None:
        out.items.append(item)
        out.first.set()

    def on_error(error: Exception) -> None:
        out.error = error
        out.done.set()

    def on_completed() -> None:
        out.completed = True
        out.done.set()

    out.subscription = source.subscribe(on_next, on_error, on_completed)  # type: ignore[attr-defined]
    return out
