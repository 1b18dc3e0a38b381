"""``BaseLlm`` and ``BaseLlmConnection``: ADK Java's model interface, in Python."""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Sequence
from typing import Any

import reactivex

from .._core.errors import UnsupportedOperationError
from .._core.types import Blob, Content, GenerateContentConfig, LlmRequest, LlmResponse
from .._rx.aio import AwaitableObservable, awaitable
from .._rx.blocking import DEFAULT_MAX_BUFFER
from .model_stream import ModelStreamEvent, derive_stream_events
from .prompt import Prompt, as_request
from .response_stream import ResponseStream

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
        """A subclass's own ``generate_content`` and ``stream_events`` take a short prompt and
        return an :class:`~rxllm.aio.AwaitableObservable` whatever Observable they build.

        The request argument may be a ``str`` or a sequence of ``Content`` on every model, yours
        too: it reaches your method as an :class:`~rxllm.LlmRequest` (see :func:`as_request`).
        ``await model.generate_content(request)`` works on every model (no extra operator per
        item: the wrapper is the same Observable).
        """
        super().__init_subclass__(**kwargs)
        for name, wrap in (("generate_content", _wrap_generate_content), ("stream_events", _wrap_stream_events)):
            own = cls.__dict__.get(name)
            if own is None or getattr(own, "__isabstractmethod__", False) or getattr(own, "_rxllm_awaitable", False):
                continue
            setattr(cls, name, wrap(own))

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

        Your implementation receives an :class:`~rxllm.LlmRequest` whatever the caller passed (a
        ``str`` or a sequence of ``Content`` is converted first). Its parameter stays typed
        ``LlmRequest`` so that implementations type-check; the concrete models
        (``SseChatModel``, ``ScriptedLlm``) declare the wider ``Prompt``, and ``model.stream(prompt)``
        takes one on every model.

        Returns a cold Observable: subscribing sends the request; disposing cancels it.
        With ``stream=False`` it emits exactly one response (``partial`` unset); with
        ``stream=True`` it emits partials, then exactly one final.
        """

    def stream_events(self, llm_request: Prompt) -> AwaitableObservable[ModelStreamEvent]:
        """The fine-grained stream of one streaming call (for consumers that start tools early).

        ``llm_request`` is an :class:`~rxllm.LlmRequest`, the user's text or a sequence of
        ``Content`` (the conversation so far).

        Emits :class:`~rxllm.TextDeltaEvent` / :class:`~rxllm.ThoughtDeltaEvent` as text arrives,
        :class:`~rxllm.ToolCallDeltaEvent` and :class:`~rxllm.ToolCallCompleteEvent` for tool calls,
        and last exactly one :class:`~rxllm.ResponseCompleteEvent` with the final aggregate. The
        default derives it from ``generate_content(llm_request, stream=True)`` (tool calls then
        arrive with the final); models that see provider chunks override it to report each call
        as soon as it is complete. Cold; disposing cancels the call.
        """
        return awaitable(derive_stream_events(self.generate_content(as_request(llm_request), stream=True)))

    def stream(
        self, prompt: Prompt, *, config: GenerateContentConfig | None = None, max_buffer: int = DEFAULT_MAX_BUFFER
    ) -> ResponseStream:
        """``for partial in model.stream("Hello!")``: the streamed answer as a plain ``for`` loop.

        For scripts and notebooks. Each partial comes as its bytes arrive, on the iterating
        thread; the final aggregate is kept in the stream's ``final`` once the loop ends (see
        :class:`~rxllm.ResponseStream`). Leaving the loop early (``break``, an exception,
        Ctrl-C) closes the connection at once. Inside an event loop, ``async for partial in
        model.generate_content(prompt, stream=True)`` instead.

        Args:
            prompt: the user's text, a sequence of ``Content`` (the conversation) or an
                :class:`~rxllm.LlmRequest`.
            config: the generation config (``response_schema``, ``temperature``, ...); with a
                request, it replaces the request's own.
            max_buffer: how many partials may wait while the loop body is busy; past it the
                I/O thread waits (backpressure).

        Raises:
            ConfigurationError: (at once) a prompt of another type.
            EventLoopError: (from the loop, at once) iterating on the thread of a running event
                loop that the call itself runs on (an ``AsyncHttpTransport`` bound to it): use
                ``async for`` there.

        >>> from rxllm import Chunk
        >>> from rxllm.testing import ScriptedLlm, scripted_turn
        >>> model = ScriptedLlm([scripted_turn(Chunk(text_delta="Hello"), Chunk(text_delta=" world"))])
        >>> stream = model.stream("Hi!")
        >>> [partial.text() for partial in stream], stream.final.text() if stream.final else None
        (['Hello', ' world'], 'Hello world')
        """
        return ResponseStream(
            self.generate_content(as_request(prompt, config), stream=True), max_buffer=max_buffer
        )

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


def _request_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call's arguments with its request (first positional, or ``llm_request=``) as an ``LlmRequest``."""
    if args:
        return (as_request(args[0]), *args[1:]), kwargs
    if "llm_request" in kwargs:
        return args, {**kwargs, "llm_request": as_request(kwargs["llm_request"])}
    return args, kwargs


def _wrap_generate_content(
    own: Callable[..., reactivex.Observable[LlmResponse]],
) -> Callable[..., AwaitableObservable[LlmResponse]]:
    @functools.wraps(own)
    def generate_content(self: BaseLlm, *args: Any, **kwargs: Any) -> AwaitableObservable[LlmResponse]:
        args, kwargs = _request_of(args, kwargs)
        return awaitable(own(self, *args, **kwargs))

    generate_content._rxllm_awaitable = True  # type: ignore[attr-defined]
    return generate_content


def _wrap_stream_events(
    own: Callable[..., reactivex.Observable[ModelStreamEvent]],
) -> Callable[..., AwaitableObservable[ModelStreamEvent]]:
    @functools.wraps(own)
    def stream_events(self: BaseLlm, *args: Any, **kwargs: Any) -> AwaitableObservable[ModelStreamEvent]:
        args, kwargs = _request_of(args, kwargs)
        return awaitable(own(self, *args, **kwargs))

    stream_events._rxllm_awaitable = True  # type: ignore[attr-defined]
    return stream_events
