"""``for partial in model.stream("Hello!")``: a model's streamed answer as a plain ``for`` loop."""

from __future__ import annotations

from types import TracebackType

from reactivex import abc as rx_abc

from .._core.types import LlmResponse
from .._rx.blocking import DEFAULT_MAX_BUFFER, BlockingIterator

__all__ = ["ResponseStream"]


class ResponseStream:
    """The partials of one streaming call, for a ``for`` loop; the final is kept in :attr:`final`.

    What :meth:`rxllm.BaseLlm.stream` returns. Iterating yields each partial as its bytes
    arrive (each carries only its new text, so printing ``partial.text()`` prints the answer
    once); the final aggregate (the whole text, usage, finish reason, function calls, the
    validated ``parsed``) is not yielded but kept in :attr:`final` once the loop ends. A turn
    with no partial at all (a model that does not stream, a tool call only) yields its final
    as the one item, so the loop never misses the answer.

    The call starts at the first iteration. Leaving the loop early (``break``, an exception,
    Ctrl-C) closes the connection at once; so do :meth:`close` and the end of a ``with`` block.
    Errors (transport, HTTP status) are raised from the loop, after the partials before them.
    A loop that could never end (on the thread of a running event loop the call itself runs on)
    raises :class:`~rxllm.EventLoopError` at once.
    """

    __slots__ = ("_final", "_items", "_yielded")

    def __init__(self, responses: rx_abc.ObservableBase[LlmResponse], *, max_buffer: int = DEFAULT_MAX_BUFFER) -> None:
        self._items = BlockingIterator(responses, max_buffer=max_buffer, what="for ... in model.stream(...)")
        self._final: LlmResponse | None = None
        self._yielded = False

    @property
    def final(self) -> LlmResponse | None:
        """The final response once the stream has ended; ``None`` before."""
        return self._final

    def __iter__(self) -> ResponseStream:
        return self

    def __next__(self) -> LlmResponse:
        while True:
            response = next(self._items)
            if response.partial:
                self._yielded = True
                return response
            self._final = response
            if not self._yielded:
                self._yielded = True
                return response

    def __enter__(self) -> ResponseStream:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._items.close()

    def close(self) -> None:
        """Close the connection unless the stream already ended (idempotent)."""
        self._items.close()
