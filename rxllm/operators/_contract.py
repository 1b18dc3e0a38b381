"""``check_contract``: the stream contract, checked item by item inside a pipeline."""

from __future__ import annotations

import threading
from collections.abc import Callable

import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable, SingleAssignmentDisposable

from .._core.errors import ContractViolationError
from .._core.types import LlmResponse

__all__ = ["check_contract"]


class _Checker:
    """The contract as incremental state: ``accept`` each response, then ``complete``.

    Each returns ``None`` or the violation. Texts are kept as lists (joined once, at the final).
    """

    def __init__(self) -> None:
        self._texts: list[str] = []
        self._thoughts: list[str] = []
        self._partials = 0
        self._final_seen = False

    def accept(self, response: LlmResponse) -> ContractViolationError | None:
        position = self._partials + (1 if self._final_seen else 0)
        if self._final_seen:
            kind = "a partial" if response.partial else "a second final"
            return ContractViolationError(
                f"{kind} (response #{position}) arrived after the final: the final must be the last response",
                rule="item_after_final",
            )
        if not response.partial:
            self._final_seen = True
            return self._check_final(response)
        if response.function_calls():
            return ContractViolationError(
                f"partial #{position} carries function calls: calls belong on the final only",
                rule="partial_function_calls",
            )
        if response.usage_metadata is not None:
            return ContractViolationError(
                f"partial #{position} carries usage: usage belongs on the final only", rule="partial_usage"
            )
        self._partials += 1
        self._texts.append(response.text())
        self._thoughts.append(response.thought_text())
        return None

    def _check_final(self, final: LlmResponse) -> ContractViolationError | None:
        if not self._partials:  # a lone final is the whole turn
            return None
        text = "".join(self._texts)
        if text != final.text():
            return ContractViolationError(
                f"the partials' text {_clip(text)!r} does not concatenate to the final's {_clip(final.text())!r}",
                rule="text_mismatch",
            )
        thought = "".join(self._thoughts)
        if thought != final.thought_text():
            return ContractViolationError(
                f"the partials' thought text {_clip(thought)!r} does not concatenate to the final's "
                f"{_clip(final.thought_text())!r}",
                rule="thought_mismatch",
            )
        return None

    def complete(self) -> ContractViolationError | None:
        if self._final_seen:
            return None
        return ContractViolationError(
            f"the stream completed after {self._partials} partial(s) without a final response", rule="no_final"
        )


def check_contract() -> Callable[[reactivex.Observable[LlmResponse]], reactivex.Observable[LlmResponse]]:
    """Pass responses through, and fail the moment the ``generate_content`` contract breaks.

    The pipeline form of :func:`rxllm.testing.assert_stream_protocol`: a partial with function
    calls or usage fails on arrival, anything after the final fails on arrival, a final whose
    text (or thought text) is not the partials' concatenation fails on arrival, and completion
    without a final fails at completion. The failure is a
    :class:`~rxllm.ContractViolationError` whose ``rule`` names the invariant; the source is
    disposed first (its connection closes). The source's own errors pass through unchanged
    (a stream may fail after partials).

    Marble (``P`` partial, ``F`` final, ``V`` = ContractViolationError)::

        source:            --P--P--F--|
        check_contract():  --P--P--F--|

        source:            --P--F--P--|
        check_contract():  --P--F--V               (rule "item_after_final")

        source:            --P--P--|
        check_contract():  --P--P--V               (rule "no_final")

    Returns:
        An operator for ``.pipe``: subscribing subscribes the source (a fresh check per
        subscription); disposing disposes it.

    >>> from rxllm import Chunk, ContractViolationError, LlmRequest, LlmResponse
    >>> from rxllm.testing import ScriptedLlm, scripted_turn
    >>> from reactivex import operators as ops
    >>> llm = ScriptedLlm([scripted_turn(Chunk(text_delta="Hi")), [LlmResponse(partial=True)]])
    >>> len(llm.generate_content(LlmRequest(), stream=True).pipe(check_contract(), ops.to_list()).run())
    2
    >>> try:
    ...     llm.generate_content(LlmRequest(), stream=True).pipe(check_contract()).run()
    ... except ContractViolationError as violation:
    ...     print(violation.rule)
    no_final
    """

    def operator(source: reactivex.Observable[LlmResponse]) -> reactivex.Observable[LlmResponse]:
        def subscribe(
            observer: rx_abc.ObserverBase[LlmResponse], scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            checker = _Checker()
            upstream = SingleAssignmentDisposable()
            lock = threading.Lock()
            state = {"done": False}

            def fail(violation: ContractViolationError) -> None:
                with lock:
                    if state["done"]:
                        return
                    state["done"] = True
                upstream.dispose()
                observer.on_error(violation)

            def on_next(response: LlmResponse) -> None:
                if state["done"]:
                    return
                violation = checker.accept(response)
                if violation is not None:
                    fail(violation)
                    return
                observer.on_next(response)

            def on_error(error: Exception) -> None:
                with lock:
                    if state["done"]:
                        return
                    state["done"] = True
                observer.on_error(error)

            def on_completed() -> None:
                violation = checker.complete()
                if violation is not None:
                    fail(violation)
                    return
                with lock:
                    if state["done"]:
                        return
                    state["done"] = True
                observer.on_completed()

            def dispose() -> None:
                state["done"] = True
                upstream.dispose()

            upstream.disposable = source.subscribe(on_next, on_error, on_completed, scheduler=scheduler)
            return Disposable(dispose)

        return reactivex.create(subscribe)

    return operator


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit // 2] + " … " + text[-limit // 2 :]
