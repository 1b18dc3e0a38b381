"""``to_text``: the rich event stream as the answer's text, for callers who only want strings."""

from __future__ import annotations

from typing import Any

import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable, SingleAssignmentDisposable

from .._core.errors import ProviderError
from ._events import AiServiceStreamingEvent, FinalResponseEvent, PartialResponseEvent
from ._relay import BoundedRelay, check_positive_int
from ._service import DEFAULT_BUFFER_SIZE

__all__ = ["to_text"]


def to_text(
    events: reactivex.Observable[AiServiceStreamingEvent],
    has_output_guardrails: bool,
    buffer_size: int = DEFAULT_BUFFER_SIZE,
) -> reactivex.Observable[str]:
    """The text of an :meth:`AiService.stream` event stream, as strings.

    What the strings concatenate to:

    * without output guardrails: the text of every :class:`PartialResponseEvent`, emitted as it
      arrives, *including the text of rounds that call tools* (a "Let me check." said before a
      tool call was already shown while it streamed: nobody knows mid-round whether the round
      will call a tool, and streamed text cannot be taken back). So the concatenation is the
      answer text of every round, in order:
      ``"".join(e.response.text() for e in events if e.kind in ("intermediate_response", "final_response"))``.
    * with output guardrails: only the text of the :class:`FinalResponseEvent` (as the guardrails
      left it), emitted once at the end: ``final.response.text()``. Tool rounds' text is left out,
      as no guardrail vetted it (and the event stream emits no partials then anyway).

    Every other event is dropped; empty strings are not emitted. Completes right after the event
    stream completes (the ``FinalResponseEvent`` that contributes no string cannot hold it open:
    Rx pushes, there is no demand to run dry). Errors propagate. A final response that ended in
    error (``error_code`` set: length, safety...) fails the text stream with
    :class:`~rxllm.ProviderError` after its text, so a text-only caller cannot mistake a cut-off
    answer for a whole one.

    Strings go to the subscriber through a bounded buffer of ``buffer_size`` (only what waits
    while the subscriber is busy on another thread counts; overflow fails with
    :class:`~rxllm.BufferOverflowError`). Cold: subscribing subscribes to ``events``; disposing
    disposes it.

    Args:
        events: the rich stream, e.g. ``service.stream("...")``.
        has_output_guardrails: whether the service has output guardrails
            (:attr:`AiService.has_output_guardrails`).
        buffer_size: the bounded buffer's size (>= 1).

    Raises:
        ConfigurationError: (at once) for a buffer size below 1.

    >>> from reactivex import operators as ops
    >>> from rxllm import Chunk
    >>> from rxllm.service import AiService
    >>> from rxllm.testing import ScriptedLlm, scripted_turn
    >>> service = AiService(ScriptedLlm([scripted_turn(Chunk(text_delta="Hello"), Chunk(text_delta=" there"))]))
    >>> to_text(service.stream("Hi"), service.has_output_guardrails).pipe(ops.to_list()).run()
    ['Hello', ' there']
    """
    capacity = check_positive_int(buffer_size, "buffer_size")

    def subscribe(observer: rx_abc.ObserverBase[str], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        upstream = SingleAssignmentDisposable()
        relay: BoundedRelay[str] = BoundedRelay(observer, capacity, upstream.dispose)

        def on_next(event: AiServiceStreamingEvent) -> None:
            if isinstance(event, PartialResponseEvent):
                if not has_output_guardrails and event.text:
                    relay.on_next(event.text)
            elif isinstance(event, FinalResponseEvent):
                response = event.response
                if has_output_guardrails:
                    text = response.text()
                    if text:
                        relay.on_next(text)
                if response.error_code is not None:
                    message = response.error_message or f"the model's answer ended in error {response.error_code}"
                    relay.on_error(ProviderError(message, code=response.error_code))
                    upstream.dispose()

        upstream.disposable = events.subscribe(on_next, relay.on_error, relay.on_completed, scheduler=scheduler)

        def dispose() -> None:
            relay.cancel()
            upstream.dispose()

        return Disposable(dispose)

    return reactivex.create(subscribe)
