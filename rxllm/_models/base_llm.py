"""``BaseLlm`` and ``BaseLlmConnection``: ADK Java's model interface, in Python."""

from __future__ import annotations

import abc
import functools
from collections.abc import Sequence
from typing import Any

import reactivex

from .._core.errors import UnsupportedOperationError
from .._core.types import Blob, Content, LlmRequest, LlmResponse
from .._rx.aio import AwaitableObservable, awaitable
from .model_stream import ModelStreamEvent, derive_stream_events

__all__ = ["BaseLlm", "BaseLlmConnection", "model_stream_events"]


class BaseLlmConnection(abc.ABC):
    """A live (BIDI) session with a model, as ADK Java's ``BaseLlmConnection``.

    The three sends each return an Observable that completes when the frames are written (or
    errors); a send is queued at the call, in order, whether or not the Observable is subscribed.
    :meth:`receive` is the session's responses (``docs/live.md`` has the rules of what it emits),
    hot for the connection and subscribable once. Disposing its subscription, or :meth:`close`,
    ends the session at once. Every returned Observable can be awaited (``await
    connection.send_content(c)``) and ``receive()`` iterated (``async for response in ...``).
    """

    @abc.abstractmethod
    def send_history(self, history: Sequence[Content]) -> reactivex.Observable[None]:
        """Send the conversation so far (ADK Java's ``sendHistory``). Completes when written."""

    @abc.abstractmethod
    def send_content(self, content: Content) -> reactivex.Observable[None]:
        """Send one turn: the user's words, or function responses (``sendContent``). Completes
        when written."""

    @abc.abstractmethod
    def send_realtime(self, blob: Blob) -> reactivex.Observable[None]:
        """Send a piece of real-time media: audio, an image or video frame (``sendRealtime``).
        Completes when written."""

    @abc.abstractmethod
    def receive(self) -> reactivex.Observable[LlmResponse]:
        """The model's responses, as they come (``receive``); subscribable once."""

    @abc.abstractmethod
    def close(self, error: BaseException | None = None) -> None:
        """End the session and release its connection (``close()`` / ``close(Throwable)``):
        ``receive()`` completes, or fails with ``error``."""


class BaseLlm(abc.ABC):
    """A model. Subclasses implement :meth:`generate_content`; ``connect`` is optional.

    Args:
        model: the model's name, e.g. ``"gpt-4o-mini"``. A request's own ``model``, when set,
            wins over it.

    The stream contract of ``generate_content(request, stream=True)``: zero or more partials
    (``partial=True``, only new text, no function calls, no usage), then exactly one final
    (``partial`` unset) with the whole turn. ``rxllm.testing.assert_stream_protocol`` checks it.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass's own ``generate_content`` returns an :class:`~rxllm.aio.AwaitableObservable`
        whatever Observable it builds, so ``await model.generate_content(request)`` works on every
        model, yours too (no extra operator per item: the wrapper is the same Observable)."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("generate_content")
        if own is None or getattr(own, "__isabstractmethod__", False) or getattr(own, "_rxllm_awaitable", False):
            return

        @functools.wraps(own)
        def generate_content(self: BaseLlm, *args: Any, **kwargs: Any) -> AwaitableObservable[LlmResponse]:
            return awaitable(own(self, *args, **kwargs))

        generate_content._rxllm_awaitable = True  # type: ignore[attr-defined]
        cls.generate_content = generate_content  # type: ignore[method-assign]

    def __init__(self, *, model: str) -> None:
        self._model = model

    @property
    def model(self) -> str:
        """The model's name."""
        return self._model

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self._model!r})"

    @abc.abstractmethod
    def generate_content(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> reactivex.Observable[LlmResponse]:
        """Ask the model.

        Returns a cold Observable: subscribing sends the request; disposing cancels it.
        With ``stream=False`` it emits exactly one response (``partial`` unset); with
        ``stream=True`` it emits partials, then exactly one final.
        """

    def stream_events(self, llm_request: LlmRequest) -> AwaitableObservable[ModelStreamEvent]:
        """The fine-grained stream of one streaming call (for consumers that start tools early).

        Emits :class:`~rxllm.TextDeltaEvent` / :class:`~rxllm.ThoughtDeltaEvent` as text arrives,
        :class:`~rxllm.ToolCallDeltaEvent` and :class:`~rxllm.ToolCallCompleteEvent` for tool calls,
        and last exactly one :class:`~rxllm.ResponseCompleteEvent` with the final aggregate. The
        default derives it from ``generate_content(llm_request, stream=True)`` (tool calls then
        arrive with the final); models that see provider chunks override it to report each call
        as soon as it is complete. Cold; disposing cancels the call.
        """
        return awaitable(derive_stream_events(self.generate_content(llm_request, stream=True)))

    def connect(self, llm_request: LlmRequest) -> BaseLlmConnection:
        """Open a live (BIDI) session. The default refuses at once.

        Raises:
            UnsupportedOperationError: always, naming the model, unless a subclass overrides.
        """
        raise UnsupportedOperationError(
            f"live (BIDI) sessions are not supported by {type(self).__name__} for model {self._model!r}"
        )


def model_stream_events(llm: BaseLlm, llm_request: LlmRequest) -> AwaitableObservable[ModelStreamEvent]:
    """The fine-grained stream of one call: the same as ``llm.stream_events(llm_request)``."""
    return awaitable(llm.stream_events(llm_request))
