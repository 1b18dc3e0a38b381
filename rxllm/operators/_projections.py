"""The projections people write by hand: text deltas, the final, the partials, the whole text."""

from __future__ import annotations

from collections.abc import Callable

import reactivex
from reactivex import abc as rx_abc
from reactivex import operators as ops

from .._core.errors import ContractViolationError
from .._core.types import LlmResponse

__all__ = ["collect_text", "final", "partials", "text_deltas"]

_Operator = Callable[[reactivex.Observable[LlmResponse]], reactivex.Observable[LlmResponse]]


def _is_partial(response: LlmResponse) -> bool:
    return bool(response.partial)


def partials() -> _Operator:
    """Only the partial responses (``partial=True``); the final is dropped, completion passes.

    Marble (``P`` partial, ``F`` final)::

        source:      --P1--P2--F--|
        partials():  --P1--P2-----|

    Returns:
        An operator for ``.pipe``; subscribing and disposing act on the source.

    >>> from rxllm import Chunk, LlmRequest
    >>> from rxllm.testing import ScriptedLlm, scripted_turn
    >>> from reactivex import operators as ops
    >>> llm = ScriptedLlm([scripted_turn(Chunk(text_delta="a"), Chunk(text_delta="b"))])
    >>> [r.text() for r in llm.generate_content(LlmRequest(), stream=True).pipe(partials(), ops.to_list()).run()]
    ['a', 'b']
    """
    return ops.filter(_is_partial)


def final() -> _Operator:
    """Only the final response, emitted as it arrives; fails if the source completes without one.

    Works for ``stream=False`` too (the one response is the final).

    Marble (``P`` partial, ``F`` final, ``V`` = :class:`~rxllm.ContractViolationError`)::

        source:   --P1--P2--F--|
        final():  ----------F--|

        source:   --P1--P2--|
        final():  ----------V          (rule "no_final")

    Returns:
        An operator for ``.pipe``; subscribing and disposing act on the source.

    >>> from rxllm import Chunk, LlmRequest
    >>> from rxllm.testing import ScriptedLlm, scripted_turn
    >>> llm = ScriptedLlm([scripted_turn(Chunk(text_delta="a"), Chunk(text_delta="b"))])
    >>> llm.generate_content(LlmRequest(), stream=True).pipe(final()).run().text()
    'ab'
    """

    def operator(source: reactivex.Observable[LlmResponse]) -> reactivex.Observable[LlmResponse]:
        def subscribe(
            observer: rx_abc.ObserverBase[LlmResponse], scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            seen = [False]

            def on_next(response: LlmResponse) -> None:
                if not response.partial:
                    seen[0] = True
                    observer.on_next(response)

            def on_completed() -> None:
                if seen[0]:
                    observer.on_completed()
                else:
                    observer.on_error(_no_final())

            return source.subscribe(on_next, observer.on_error, on_completed, scheduler=scheduler)

        return reactivex.create(subscribe)

    return operator


def text_deltas() -> Callable[[reactivex.Observable[LlmResponse]], reactivex.Observable[str]]:
    """The answer text as it grows: each partial's non-empty text, so the deltas join to the final's text.

    Thought text is left out. When no partial came (``stream=False``, or partials suppressed),
    the final's text is the one delta.

    Marble (``P("a")`` a partial with text ``"a"``, ``F("ab")`` the final)::

        source:         --P("a")--P("")--P("b")--F("ab")--|
        text_deltas():  --"a"------------"b"--------------|

        source:         --F("ab")--|
        text_deltas():  --"ab"-----|

    Returns:
        An operator for ``.pipe``; subscribing and disposing act on the source.

    >>> from rxllm import Chunk, LlmRequest
    >>> from rxllm.testing import ScriptedLlm, scripted_turn
    >>> from reactivex import operators as ops
    >>> llm = ScriptedLlm([scripted_turn(Chunk(thought_delta="hm"), Chunk(text_delta="a"), Chunk(text_delta="b"))] * 2)
    >>> llm.generate_content(LlmRequest(), stream=True).pipe(text_deltas(), ops.to_list()).run()
    ['a', 'b']
    >>> llm.generate_content(LlmRequest(), stream=False).pipe(text_deltas(), ops.to_list()).run()
    ['ab']
    """

    def operator(source: reactivex.Observable[LlmResponse]) -> reactivex.Observable[str]:
        def subscribe(
            observer: rx_abc.ObserverBase[str], scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            partial_seen = [False]

            def on_next(response: LlmResponse) -> None:
                if response.partial:
                    partial_seen[0] = True
                elif partial_seen[0]:
                    return  # the final repeats what the partials said
                text = response.text()
                if text:
                    observer.on_next(text)

            return source.subscribe(on_next, observer.on_error, observer.on_completed, scheduler=scheduler)

        return reactivex.create(subscribe)

    return operator


def collect_text() -> Callable[[reactivex.Observable[LlmResponse]], reactivex.Observable[str]]:
    """The whole answer text, once: the final's text, emitted when the source completes.

    Marble (``V`` = :class:`~rxllm.ContractViolationError`)::

        source:           --P("a")--P("b")--F("ab")--|
        collect_text():   ---------------------------("ab")|

        source:           --P("a")--|
        collect_text():   ----------V        (rule "no_final")

    Returns:
        An operator for ``.pipe``; subscribing and disposing act on the source. Partials are
        not kept (keeping every partial costs memory and garbage-collector time; see the "partials
        kept" rows of ``docs/benchmarks.md``).

    >>> from rxllm import Chunk, LlmRequest
    >>> from rxllm.testing import ScriptedLlm, scripted_turn
    >>> llm = ScriptedLlm([scripted_turn(Chunk(text_delta="Hello"), Chunk(text_delta=" world"))])
    >>> llm.generate_content(LlmRequest(), stream=True).pipe(collect_text()).run()
    'Hello world'
    """

    def operator(source: reactivex.Observable[LlmResponse]) -> reactivex.Observable[str]:
        def subscribe(
            observer: rx_abc.ObserverBase[str], scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            text: list[str] = []

            def on_next(response: LlmResponse) -> None:
                if not response.partial:
                    text[:] = [response.text()]

            def on_completed() -> None:
                if not text:
                    observer.on_error(_no_final())
                    return
                observer.on_next(text[0])
                observer.on_completed()

            return source.subscribe(on_next, observer.on_error, on_completed, scheduler=scheduler)

        return reactivex.create(subscribe)

    return operator


def _no_final() -> ContractViolationError:
    return ContractViolationError("the stream completed without a final response", rule="no_final")
