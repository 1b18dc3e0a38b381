"""A scripted ``BaseLlm`` for tests: it answers each call with the next scripted turn."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable

from .._aggregation import StreamAggregator
from .._aio import AwaitableObservable
from .._base_llm import BaseLlm
from .._chunk import Chunk
from .._errors import LimitExceededError
from .._types import LlmRequest, LlmResponse

__all__ = ["ScriptedLlm", "scripted_turn"]

ScriptItem = LlmResponse | Exception


def scripted_turn(*chunks: Chunk) -> list[LlmResponse]:
    """The contract-correct responses for a stream of chunks: its partials, then its final.

    Runs the real :class:`~rxllm.StreamAggregator`, so the sequence is what a streaming
    provider would emit for those chunks.

    >>> from rxllm import Chunk, ToolCallFragment
    >>> turn = scripted_turn(Chunk(text_delta="Checking"),
    ...                      Chunk(tool_call_fragments=(ToolCallFragment(0, "c1", "get_order", '{"order_id":"A17"}'),)))
    >>> [r.partial for r in turn], turn[-1].function_calls()[0].args
    ([True, None], {'order_id': 'A17'})
    """
    aggregator = StreamAggregator()
    out: list[LlmResponse] = []
    for chunk in chunks:
        out.extend(aggregator.accept(chunk))
    out.append(aggregator.finish())
    return out


class ScriptedLlm(BaseLlm):
    """A model that answers call *n* with scripted turn *n*.

    Each turn is a sequence of responses (and exceptions, emitted as ``on_error`` where they
    stand). With ``stream=True`` the turn is emitted as scripted; with ``stream=False`` only its
    last response is, with ``partial`` unset. Every call is recorded in :attr:`requests` as
    ``(llm_request, stream)``. Emission is synchronous on subscribe.

    >>> from reactivex import operators as ops
    >>> from rxllm import LlmRequest
    >>> llm = ScriptedLlm([scripted_turn(Chunk(text_delta="Hi"))])
    >>> [r.partial for r in llm.generate_content(LlmRequest(), stream=True).pipe(ops.to_list()).run()]
    [True, None]
    """

    def __init__(self, turns: Iterable[Sequence[ScriptItem]], *, model: str = "scripted") -> None:
        super().__init__(model=model)
        self._turns = [list(turn) for turn in turns]
        self._lock = threading.Lock()
        self.requests: list[tuple[LlmRequest, bool]] = []

    def generate_content(self, llm_request: LlmRequest, stream: bool = False) -> AwaitableObservable[LlmResponse]:
        """Emit the next scripted turn (cold: the turn is taken at subscribe time)."""

        def subscribe(
            observer: rx_abc.ObserverBase[LlmResponse], scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            with self._lock:
                number = len(self.requests)
                self.requests.append((llm_request, stream))
            if number >= len(self._turns):
                message = f"ScriptedLlm has only {len(self._turns)} scripted turn(s); this is call #{number + 1}"
                observer.on_error(LimitExceededError(message))
                return Disposable()
            turn = self._turns[number]
            items = turn if stream else _as_single(turn)
            for item in items:
                if isinstance(item, Exception):
                    observer.on_error(item)
                    return Disposable()
                observer.on_next(item)
            observer.on_completed()
            return Disposable()

        return AwaitableObservable(reactivex.create(subscribe))


def _as_single(turn: Sequence[ScriptItem]) -> list[ScriptItem]:
    errors = [item for item in turn if isinstance(item, Exception)]
    if errors:
        return [errors[0]]
    if not turn:
        return []
    last = turn[-1]
    assert isinstance(last, LlmResponse)
    return [last.model_copy(update={"partial": None})]
